"""Checks a commit message's shape (the pre-commit commit-msg hook): a subject line of at most 72
characters, a blank line, then a body. ``python .ci/commit_msg.py FILE``; exits 1 with what to fix."""
import sys

LIMIT = 72


def problems(message: str) -> list:
    lines = [line for line in message.splitlines() if not line.startswith('#')]
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or not lines[0].strip():
        return ['the message is empty: write a subject line, a blank line, then a body']
    found = []
    if len(lines[0]) > LIMIT:
        found.append(f'the subject line has {len(lines[0])} characters: shorten it to {LIMIT} at most')
    if len(lines) < 3 or lines[1].strip():
        found.append('a blank line, then a body (what changed and why), must follow the subject line')
    return found


if __name__ == '__main__':
    with open(sys.argv[1], encoding='utf-8') as f:
        found = problems(f.read())
    for problem in found:
        print(f'commit message: {problem}', file=sys.stderr)
    sys.exit(1 if found else 0)
