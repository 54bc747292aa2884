"""Prints the markdown table of scripts/calibrated_quant_card.sh for one
model folder. Usage: format_calibrated_card.py DIR "TYPES" "METHODS"."""
import json
import os
import re
import sys


def slug(text):
    return re.sub(r"[^a-z0-9_]", "", text.lower().replace("+", "_").replace(" ", "_"))


def load(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)["result"]


def calibration_cost(log_path):
    """(seconds, peak RSS MB) of the quantize run, from /usr/bin/time -v."""
    if not os.path.exists(log_path):
        return "", ""
    text = open(log_path).read()
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", text)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    seconds = ""
    if wall:
        h, m, s = wall.groups()
        seconds = f"{(int(h or 0) * 3600 + int(m) * 60 + float(s)):.0f}"
    return seconds, (f"{int(rss.group(1)) / 1024:.0f}" if rss else "")


def main():
    d, types, methods = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
    print(f"\n### {os.path.basename(d)}\n")
    print("| type | method | KLD mean | KLD p99 | top-1 % | ΔPPL | unseen KLD mean | unseen top-1 % | unseen ΔPPL "
          "| quantize s | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for t in types:
        for m in methods + ["llama.cpp imatrix"]:
            name = slug(f"{t} {m}")
            card, unseen = load(f"{d}/{name}.card.json"), load(f"{d}/{name}.unseen.json")
            if card is None:
                continue
            sec, rss = calibration_cost(f"{d}/{name}.quantize.log")
            u = unseen or {}
            print(f"| {t} | {m} | {card['mean_kld']:.4f} | {card['p99_kld']:.3f} | {100 * card['top1']:.2f} | "
                  f"{card['delta_ppl']:+.3f} | {u.get('mean_kld', float('nan')):.4f} | "
                  f"{100 * u.get('top1', float('nan')):.2f} | {u.get('delta_ppl', float('nan')):+.3f} | {sec} | {rss} |")


main()
