#!/usr/bin/env python3
"""Instruction counts of the loops of functions in a GCC aarch64 assembly
file (docs/PERF.md, "ARM"): for each loop (a label and the backward branch
to it), its length, the length without its nested loops, and the number of
sdot / smmla (or .inst words, as inline asm encodes smmla) in it.

  aarch64-linux-gnu-gcc -O3 -march=armv8.2-a+dotprod+fp16 -S f.c -o f.s
  scripts/arm_loops.py f.s FUNCTION...
"""
import re
import sys

BRANCH = re.compile(r'^(b\.?\w*|cbnz|cbz|tbnz|tbz)\s+(?:\w+,\s*)*(?:#\d+,\s*)?(\.L\w+)$')


def function_insns(lines, fn):
    labels, insns, on = {}, [], False
    for line in lines:
        if line.startswith(fn + ':'):
            on = True
            continue
        if not on:
            continue
        if line.startswith('\t.size\t' + fn + ','):
            break
        m = re.match(r'^(\.L\w+):', line)
        if m:
            labels[m.group(1)] = len(insns)
        elif line.startswith('\t') and not line.startswith('\t.') and line.strip():
            insns.append(line.strip())
        elif line.startswith('\t.inst'):
            insns.append(line.strip())
    return labels, insns


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    lines = open(sys.argv[1]).read().split('\n')
    for fn in sys.argv[2:]:
        labels, insns = function_insns(lines, fn)
        loops = []
        for i, ins in enumerate(insns):
            m = BRANCH.match(ins)
            if m and m.group(2) in labels and labels[m.group(2)] <= i:
                loops.append((labels[m.group(2)], i))
        loops.sort()
        print(f'{fn}: {len(insns)} instructions')
        if len(insns) < 4:
            print('  ' + ' / '.join(insns))
        for s, e in loops:
            inner = [o for o in loops if o != (s, e) and s <= o[0] and o[1] <= e]
            direct = [o for o in inner if not any(p != o and p[0] <= o[0] and o[1] <= p[1] for p in inner)]
            own = (e - s + 1) - sum(o[1] - o[0] + 1 for o in direct)
            mac = sum(1 for x in insns[s:e + 1] if x.split()[0] in ('sdot', 'smmla', 'usmmla', 'usdot', '.inst'))
            print(f'  loop [{s}, {e}]: {e - s + 1} instructions, {own} outside nested loops, {mac} sdot/smmla')


if __name__ == '__main__':
    main()
