#!/usr/bin/python3
"""Old against new lmq, alternated: `OLD=... NEW=... [MODELS=dir] [PP=512 TG=128 ALTS=3 THREADS=2]
ab_lmq.py T1,T2 [ISA]` runs `lmq bench -m $MODELS/m-T.lmq -p PP -n TG -t THREADS -r 1` with each
binary ALTS times, one after the other, under LMQ_ISA=ISA (default avx512), and prints
min / median / max t/s per binary and the ratio of the medians. Take the CPU lock around it."""
import json, os, subprocess, sys, statistics as st
W = os.environ.get("MODELS", "/work/scratch/avx2/speed")
bins = {"old": os.environ["OLD"], "new": os.environ["NEW"]}
isa = sys.argv[2] if len(sys.argv) > 2 else "avx512"
PP, TG, ALTS = os.environ.get("PP", "512"), os.environ.get("TG", "128"), int(os.environ.get("ALTS", "3"))
THREADS = os.environ.get("THREADS", "2")
for ty in sys.argv[1].split(","):
    res = {k: [] for k in bins}
    for a in range(ALTS):
        for k, b in bins.items():
            env = dict(os.environ); env["LMQ_ISA"] = isa
            out = subprocess.run([b, "bench", "-m", f"{W}/m-{ty}.lmq", "-p", PP, "-n", TG, "-t", THREADS, "-r", "1",
                                  "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                 check=True).stdout
            res[k].append({x["test"][:2]: x["tokens_per_second"] for x in json.loads(out)
                           if x.get("test", "")[:2] in ("pp", "tg") and "sampler" not in x})
    for t in ("pp", "tg"):
        if not all(t in x for x in res["old"] + res["new"]): continue
        f = lambda k: "%.1f / %.1f / %.1f" % (min(x[t] for x in res[k]), st.median(x[t] for x in res[k]),
                                              max(x[t] for x in res[k]))
        print(ty, isa, t, "old", f("old"), "new", f("new"),
              "new/old %.2fx" % (st.median(x[t] for x in res["new"]) / st.median(x[t] for x in res["old"])), flush=True)
