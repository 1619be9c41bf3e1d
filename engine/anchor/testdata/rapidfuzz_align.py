#!/usr/bin/env python3
"""Second aligner for the anchoring benchmark.

Reads the JSON that TestAnchorBenchmark writes (ANCHORBENCH_OUT), anchors
every case with rapidfuzz's fuzz.partial_ratio_alignment, the way a fuzzy
string matcher is commonly used for quotes: both texts lower-cased and with
every character other than a letter or digit made a space (rapidfuzz's own
default_process, kept to the same length so offsets hold), the cited
document first, the best of the others when it falls below the cut-off,
which is the Go aligner's similarity threshold. It scores both aligners
alike and prints them side by side per category.

Usage: rapidfuzz_align.py CASES.json
"""

import json
import sys

from rapidfuzz import fuzz


def process(s):
    """Lower-case s and blank out what is not a letter or digit, keeping
    each character's offset (code points, as the Go side counts them)."""
    out = []
    for ch in s:
        low = ch.lower()
        if len(low) != 1:
            low = ch
        out.append(low if low.isalnum() else " ")
    return "".join(out)


def anchor(case, names, processed, cutoff):
    quote = process(case["quote"])
    if not quote.strip():
        return None
    cited = case["origin"] in processed
    order = [case["origin"]] + [n for n in names if n != case["origin"]] if cited else names
    best = None
    for k, name in enumerate(order):
        r = fuzz.partial_ratio_alignment(quote, processed[name], score_cutoff=cutoff)
        if r is None or r.score < cutoff:
            continue
        if k == 0 and cited:
            return name, r.dest_start, r.dest_end
        if best is None or r.score > best[0]:
            best = (r.score, name, r.dest_start, r.dest_end)
    return best and best[1:]


def correct(case, found):
    return (found is not None and case["doc"] != "" and found[0] == case["doc"]
            and found[1] < case["end"] and case["start"] < found[2])


class Score:
    def __init__(self):
        self.cases = self.sourced = self.found = self.correct = self.flagged = 0

    def add(self, case, found):
        self.cases += 1
        self.flagged += bool(case.get("flagged")) and found is not None
        self.sourced += case["doc"] != ""
        self.found += found is not None
        self.correct += correct(case, found)

    def recall(self):
        return self.correct / self.sourced if self.sourced else None

    def precision(self):
        return self.correct / self.found if self.found else None


def fmt(x):
    return "    -" if x is None else f"{x:5.3f}"


def main(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    cutoff = data["threshold"] * 100
    names = [d["name"] for d in data["documents"]]
    processed = {d["name"]: process(d["text"]) for d in data["documents"]}
    ours, theirs, order = {}, {}, []
    for case in data["cases"]:
        cat = case["category"]
        if cat not in ours:
            ours[cat], theirs[cat] = Score(), Score()
            order.append(cat)
        mine = (case["found_doc"], case["found_start"], case["found_end"]) if case["found"] else None
        ours[cat].add(case, mine)
        theirs[cat].add(case, anchor(case, names, processed, cutoff))
    total_ours, total_theirs = Score(), Score()
    for s, t in ((total_ours, ours), (total_theirs, theirs)):
        for sc in t.values():
            s.cases += sc.cases
            s.sourced += sc.sourced
            s.found += sc.found
            s.correct += sc.correct
            s.flagged += sc.flagged

    print(f"{len(data['cases'])} cases over {len(names)} contracts ({', '.join(names)}); threshold {data['threshold']}")
    print(f"{'':12} {'':5}   {'anchor (Go)':^34}   {'rapidfuzz partial_ratio':^26}")
    print(f"{'category':12} {'cases':>5}   {'anchored':>8} {'recall':>7} {'precis.':>8} {'altered':>7}"
          f"   {'anchored':>8} {'recall':>7} {'precis.':>8}")
    for cat in order + ["all"]:
        o, t = (total_ours, total_theirs) if cat == "all" else (ours[cat], theirs[cat])
        print(f"{cat:12} {o.cases:5}   {o.found:8} {fmt(o.recall()):>7} {fmt(o.precision()):>8} {o.flagged:7}"
              f"   {t.found:8} {fmt(t.recall()):>7} {fmt(t.precision()):>8}")
    print("recall: cases with a source anchored so as to overlap it; precision: anchored cases that do;")
    print("invented quotes have no source: every one anchored is a false anchor;")
    print("altered: anchored spans whose differences from the quote (numbers, amounts, dates,")
    print("negations, names) mark the evidence altered; the 'altered' cases change one of those.")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
