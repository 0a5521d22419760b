#!/usr/bin/python3
"""Side by side: lmq (LMQ_ISA given) vs llama.cpp-avx2 vs ik-avx2 (-rtr 1), alternated, each run under the CPU lock."""
import json, os, subprocess, sys
W = os.environ.get("MODELS", "/work/scratch/avx2/speed")
LMQ = os.environ.get("LMQ", "build/lmq")
ISA = os.environ.get("ISA", "avx2")
THREADS = os.environ.get("THREADS", "2")
PP = int(os.environ.get("PP", "512"))
TG = int(os.environ.get("TG", "128"))
TOOLS = {"lmq": None, "llama": "/work/anchors/llama.cpp-avx2/build/bin/llama-bench", "ik": "/work/anchors/ik-avx2/build/bin/llama-bench"}
def run(cmd, env=None):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env).stdout
    return out
def one(tool, ty, p, n):
    if tool == "lmq":
        env = dict(os.environ); env["LMQ_ISA"] = ISA
        rows = json.loads(run([LMQ, "bench", "-m", f"{W}/m-{ty}.lmq", "-p", str(p), "-n", str(n), "-t", THREADS, "-r", "1", "--json"], env))
        r = {}
        for x in rows:
            if x.get("test", "").startswith("pp"): r["pp"] = x["tokens_per_second"]
            elif x.get("test", "").startswith("tg") and "sampler" not in x: r["tg"] = x["tokens_per_second"]
        return r
    extra = ["-rtr", "1"] if tool == "ik" else []
    rows = json.loads(run([TOOLS[tool], "-m", f"{W}/m-{ty}.gguf", "-p", str(p), "-n", str(n), "-t", THREADS, "-r", "1", "-o", "json"] + extra))
    r = {}
    for x in rows:
        if x.get("n_prompt", 0) > 0 and x.get("n_gen", 0) == 0: r["pp"] = x["avg_ts"]
        elif x.get("n_gen", 0) > 0 and x.get("n_prompt", 0) == 0: r["tg"] = x["avg_ts"]
    return r
types = sys.argv[1].split(",")
tools = sys.argv[2].split(",") if len(sys.argv) > 2 else ["lmq", "llama", "ik"]
alts = int(sys.argv[3]) if len(sys.argv) > 3 else 3
for ty in types:
    res = {t: [] for t in tools}
    for a in range(alts):
        for t in tools:
            res[t].append(one(t, ty, PP, TG))
            print(json.dumps({"type": ty, "alt": a, "tool": t, **res[t][-1]}), flush=True)
    print(json.dumps({"type": ty, "summary": res}), flush=True)
