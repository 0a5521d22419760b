#!/usr/bin/python3
"""Speed table of lmq on the synthetic 1.1 B Llama, type by type (issue 14).

  tests/bench/speed_table.py [--lmq build/lmq] [--work /tmp/lmq-speed]
        [--types "q4_k_m q4_0 q8_0 iq4_xs q6_k q5_k_m iq4_nl bf16 f16"]
        [--threads "1 2"] [-p 512] [-n 128] [-r 3]
        [--llama-bench PATH [--llama-args "-rtr 1"]] [--json]

Makes the checkpoint once (../shared/tools/make_synthetic_llama.py --preset 1b
--dtype bf16, seed 1234: the file of ../shared/reference's llama.cpp figures),
converts it to bf16 and quantizes it to each type, then runs
`lmq bench -m MODEL -p 512 -n 128 -t T -r R --json` per type and thread count.
With --llama-bench, each lmq run is followed at once by llama-bench on the same
weights (`lmq export` to GGUF), so each ratio comes from one side-by-side
pair; run it on an otherwise idle machine. A benchmark, not a test: it
asserts nothing and is not part of ctest.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")


def run(cmd, **kw):
    print("+ " + " ".join(cmd), file=sys.stderr)
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, **kw).stdout


def lmq_bench(lmq, model, p, n, t, r):
    out = json.loads(run([lmq, "bench", "-m", model, "-p", str(p), "-n", str(n), "-t", str(t), "-r", str(r), "--json"]))
    res = {}
    for row in out:
        if row.get("test", "").startswith("pp"):
            res["pp"] = row["tokens_per_second"]
        elif row.get("test", "").startswith("tg"):
            res["tg"] = row["tokens_per_second"]
        elif row.get("test") == "weight_bytes_per_token":
            res["bytes_per_token"] = row["bytes"]
    return res


def llama_bench(exe, gguf, p, n, t, r, extra):
    out = json.loads(run([exe, "-m", gguf, "-p", str(p), "-n", str(n), "-t", str(t), "-r", str(r), "-o", "json"] + extra))
    res = {}
    for row in out:
        if row.get("n_prompt", 0) > 0 and row.get("n_gen", 0) == 0:
            res["pp"] = row["avg_ts"]
        elif row.get("n_gen", 0) > 0 and row.get("n_prompt", 0) == 0:
            res["tg"] = row["avg_ts"]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lmq", default=os.path.join(ROOT, "build", "lmq"))
    ap.add_argument("--work", default="/tmp/lmq-speed")
    ap.add_argument("--hf", help="a Llama HF checkpoint to use instead of the synthetic 1.1 B")
    ap.add_argument("--types", default="q4_k_m q4_0 q8_0 iq4_xs q6_k q5_k_m iq4_nl bf16 f16")
    ap.add_argument("--threads", default="1 2")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--llama-bench")
    ap.add_argument("--llama-args", default="")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    os.makedirs(a.work, exist_ok=True)
    hf = a.hf or os.path.join(a.work, "syn1b")
    if not a.hf and not os.path.exists(os.path.join(hf, "model.safetensors")):
        run(["/usr/bin/python3", os.path.join(SHARED, "tools", "make_synthetic_llama.py"), hf, "--preset", "1b",
             "--dtype", "bf16"])
    base = os.path.join(a.work, "m-bf16.lmq")
    if not os.path.exists(base):
        run([a.lmq, "convert", hf, "-o", base, "--type", "bf16"])
    rows = []
    for ty in a.types.split():
        model = base if ty == "bf16" else os.path.join(a.work, "m-%s.lmq" % ty)
        if not os.path.exists(model):
            run([a.lmq, "quantize", base, model, "--type", ty])
        gguf = None
        if a.llama_bench:
            gguf = model[:-4] + ".gguf"
            if not os.path.exists(gguf):
                run([a.lmq, "export", model, "-o", gguf])
        for t in [int(x) for x in a.threads.split()]:
            row = {"type": ty, "threads": t, "lmq": lmq_bench(a.lmq, model, a.p, a.n, t, a.r)}
            if gguf:
                row["llama"] = llama_bench(a.llama_bench, gguf, a.p, a.n, t, a.r, a.llama_args.split())
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    pp, tg = "pp%d" % a.p, "tg%d" % a.n
    if a.llama_bench:
        print("| type | threads | %s lmq | %s llama.cpp | ratio | %s lmq | %s llama.cpp | ratio |" % (pp, pp, tg, tg))
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
    else:
        print("| type | threads | %s t/s | %s t/s | weights read per token |" % (pp, tg))
        print("|---|---:|---:|---:|---:|")
    for row in rows:
        m = row["lmq"]
        if a.llama_bench:
            l = row["llama"]
            rp = m.get("pp", 0) / l["pp"] if l.get("pp") else float("nan")
            rt = m.get("tg", 0) / l["tg"] if l.get("tg") else float("nan")
            print("| %s | %d | %.2f | %.2f | %.2fx | %.2f | %.2f | %.2fx |" % (
                row["type"], row["threads"], m.get("pp", 0), l.get("pp", 0), rp, m.get("tg", 0), l.get("tg", 0), rt))
        else:
            print("| %s | %d | %.2f | %.2f | %.1f MiB |" % (row["type"], row["threads"], m.get("pp", 0), m.get("tg", 0),
                                                          m.get("bytes_per_token", 0) / 2**20))


if __name__ == "__main__":
    main()
