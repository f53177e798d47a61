#!/usr/bin/env python3
"""Model of a_scale_wraps.patch's A-scale slots, run on random unit sequences (CPU, no GPU).

The producer walks the stage ring (stage, phase) as the kernel does, loading one K block or a pair at a
time, and chooses the A-scale box of each load as the patch does: at a wrap's first stage the whole
wrap's scales where the unit covers the wrap, none at the wrap's other stages, else the load's own. A
K block's slot is stage + stages * phase. A load of counter n (a pair: n and n + 1) is issued only
after the consumer has released every K block up to n + pair - 1 - stages (its stages' previous uses);
its scale bytes complete on the barrier of K block n, which the consumer waits for before K block n.

Checked for every consumer read: the slot holds that K block's scales (the latest write attached to a
load at or before it), and no write issued before the read may overwrite the slot while it still holds
an earlier K block the read needs. --slots-per-stage 1 (the layout before the patch, with wrap boxes)
shows the check failing.
"""

import argparse
import random


def check(stages, units, pairs, slots_per_stage=2, min_pair_unit=48):
    wrap_stride = stages if slots_per_stage == 2 else 0
    writes = []  # (gate: last K block released before the write, slot, content, attached load n)
    reads = []   # (n, slot, content)
    pos = {"n": 0, "stage": 0, "phase": 0, "wrap": False}

    def slot():
        return pos["stage"] + wrap_stride * pos["phase"]

    def advance():
        pos["n"] += 1
        pos["stage"] += 1
        if pos["stage"] == stages:
            pos["stage"], pos["phase"] = 0, pos["phase"] ^ 1

    def scale_kblocks(kb, own, kb_end):
        if pos["stage"] == 0:
            pos["wrap"] = kb + stages <= kb_end
        return (stages if pos["stage"] == 0 else 0) if pos["wrap"] else own

    def load(m, kb, count, kb_end):
        if count == 2:
            assert pos["stage"] + 1 < stages
        g = scale_kblocks(kb, count, kb_end)
        for j in range(g):
            writes.append((pos["n"] + count - 1 - stages, slot() + j, (m, kb + j), pos["n"]))
        for j in range(count):
            reads.append((pos["n"], slot(), (m, kb + j)))
            advance()

    for m, begin, end in units:
        if pairs and end - begin >= min_pair_unit:
            load(m, begin, 1, end)
            kb = begin + 1
            while kb < end:
                step = 2 if kb + 1 < end and pos["stage"] + 1 < stages else 1
                load(m, kb, step, end)
                kb += step
        else:
            for kb in range(begin, end):
                load(m, kb, 1, end)

    for n, s, want in reads:
        landed = [w for w in writes if w[1] == s and w[3] <= n]
        if not landed or max(landed, key=lambda w: w[3])[2] != want:
            return f"K block {n} reads slot {s} without its scales"
        early = [w for w in writes if w[1] == s and w[0] < n < w[3] and w[2] != want]
        if early:
            return f"slot {s} refilled by load {early[0][3]} while K block {n} still reads it"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20000)
    ap.add_argument("--slots-per-stage", type=int, default=2, choices=(1, 2))
    args = ap.parse_args()
    rng = random.Random(1)
    failures = 0
    for _ in range(args.trials):
        stages = rng.choice([4, 5, 6, 8, 10, 13])
        units = []
        for m in range(rng.randint(1, 6)):
            begin = rng.randint(0, 3) if rng.random() < 0.3 else 0
            units.append((m, begin, begin + rng.randint(1, rng.choice([1, 2, 3, 4, 5, 6, 7, 12, 16, 48, 55, 56]))))
        pairs = rng.random() < 0.5
        err = check(stages, units, pairs, args.slots_per_stage, rng.choice([4, 48]))
        if err:
            failures += 1
            if failures <= 3:
                print(f"stages {stages} pairs {pairs} units {units}: {err}")
    print(f"{args.trials} unit sequences, {failures} failing")
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
