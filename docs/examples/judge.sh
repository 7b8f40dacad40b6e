#!/bin/sh
# A stand-in for an LLM judge, for the graded examples in this folder: it answers a prompt
# with the reply a person wrote for exactly that prompt (judge/<sha256 of the prompt>.txt).
# pab grade runs it as a CLI judge (--judge cli --judge-cmd .../judge.sh): prompt on stdin,
# reply on stdout. A prompt with no reply yet is saved to judge/pending/ and the call fails,
# so the examples are never graded by a reply written for another prompt.
set -eu
dir=$(cd "$(dirname "$0")" && pwd)/judge
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
cat > "$tmp"
sum=$(sha256sum "$tmp" | cut -c1-64)
if [ -f "$dir/$sum.txt" ]; then
	cat "$dir/$sum.txt"
	exit 0
fi
mkdir -p "$dir/pending"
cp "$tmp" "$dir/pending/$sum.prompt"
echo "judge.sh: no reply written for prompt $sum (saved to $dir/pending/$sum.prompt)" >&2
exit 3
