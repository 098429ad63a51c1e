#!/usr/bin/python3
"""Plots of the GPU engine's benchmark output (docs/bench/*.jsonl) into PNGs
beside this script. Run with Debian's python3-matplotlib:

    /usr/bin/python3 docs/plots/plot.py
"""
import json, os
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

here = os.path.dirname(os.path.abspath(__file__))
bench = os.path.join(here, "..", "bench")

def load(name):
    return [json.loads(l) for l in open(os.path.join(bench, name)) if l.strip()]

def batch_plot():
    rs = load("2026-11-22-h100-sweep-batch-v4.jsonl")
    b = [r["batch"] for r in rs]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(b, [r["mlps"] for r in rs], "o-", label="GPU end to end, pinned batches (8 streams)")
    ax.plot(b, [r["mlps_staged"] for r in rs], "s-", label="GPU end to end, through host staging copies")
    ax.plot(b, [r["mlps_kernel"] for r in rs], "^--", label="GPU kernel alone")
    ax.plot(b, [r["mlps_cpu"] for r in rs], "x:", label="CPU backend, one core")
    ax.set_xscale("log", base=2); ax.set_yscale("log")
    ax.set_xlabel("batch (addresses)"); ax.set_ylabel("million lookups/s")
    ax.set_title("GAMT IPv4 lookups, full BGP table (901,899 prefixes), H100 PCIe5")
    ax.grid(True, which="both", alpha=.3); ax.legend(fontsize=8)
    fig.tight_layout(); fig.savefig(os.path.join(here, "lpm-v4-batch.png"), dpi=110)

def latency_plot():
    rs = load("2026-11-22-h100-latency-v4.jsonl")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for d in sorted({r["depth"] for r in rs}):
        s = [r for r in rs if r["depth"] == d]
        ax.plot([r["batch_latency_us"] for r in s], [r["mlps"] for r in s], "o-", label="%d batches in flight" % d)
        for r in s:
            ax.annotate(str(r["batch"]), (r["batch_latency_us"], r["mlps"]), fontsize=7)
    ax.axvline(50, color="grey", ls="--"); ax.axhline(1000, color="grey", ls="--")
    ax.set_xlabel("mean batch latency (µs, Submit to results on the host)"); ax.set_ylabel("million lookups/s")
    ax.set_title("Latency-bounded IPv4 lookups (labels: batch size), H100")
    ax.grid(True, alpha=.3); ax.legend(fontsize=8)
    fig.tight_layout(); fig.savefig(os.path.join(here, "lpm-v4-latency.png"), dpi=110)

def classify_plot():
    rs = load("2026-11-22-h100-sweep-classify.jsonl")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4.2))
    byc = sorted([r for r in rs if r["entries"] == 65536], key=lambda r: r["classes"])
    a1.plot([r["classes"] for r in byc], [r["mpps"] for r in byc], "o-", label="GPU end to end")
    a1.plot([r["classes"] for r in byc], [r["mpps_kernel"] for r in byc], "^--", label="GPU kernel")
    a1.plot([r["classes"] for r in byc], [max(r["mpps_cpu"], 1e-2) for r in byc], "x:", label="CPU, one core")
    a1.set_xscale("log", base=2); a1.set_yscale("log"); a1.set_xlabel("classes (65,536 rules)"); a1.set_ylabel("Mpackets/s")
    a1.grid(True, which="both", alpha=.3); a1.legend(fontsize=8)
    byn = sorted([r for r in rs if r["classes"] == 16], key=lambda r: r["entries"])
    a2.plot([r["entries"] for r in byn], [r["mpps"] for r in byn], "o-", label="GPU end to end")
    a2.plot([r["entries"] for r in byn], [r["mpps_kernel"] for r in byn], "^--", label="GPU kernel")
    a2.plot([r["entries"] for r in byn], [r["mpps_cpu"] for r in byn], "x:", label="CPU, one core")
    a2.set_xscale("log", base=2); a2.set_yscale("log"); a2.set_xlabel("rules (16 classes)")
    a2.grid(True, which="both", alpha=.3); a2.legend(fontsize=8)
    fig.suptitle("Bloom search, synthetic rule sets (GSwitch §6), H100, batches of 262,144")
    fig.tight_layout(); fig.savefig(os.path.join(here, "classify-rules-classes.png"), dpi=110)

batch_plot(); latency_plot(); classify_plot()
