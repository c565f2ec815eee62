"""What BM25's Korean analyzer (adapters/vectors/korean_morphemes.py) costs a process the first
time it cuts Korean, and whether kiwipiepy's pool of native threads (its default, the product's
choice) or cutting in the calling thread (``num_workers=0``) changes that.

Each variant loads in a fresh process, alternated ``--rounds`` times. A ticking thread measures
the longest stretch in which no other Python thread could run (the interpreter's lock held): that
is how long every other request of an API process waits on its first Korean query. Also: the
process's resident memory after the first cut, and cutting speed on the shared corpus's Korean text.
``--cold``: the model's files are dropped from the page cache before each load (as after a boot).

    .venv/bin/python -m bench.korean_analyzer [--rounds 3] [--cold]

Prints ``RESULT`` lines.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from .common import load_corpus, machine

_PROBE = """
import json, resource, sys, threading, time, warnings
gaps, stop = [], False
def tick():
    last = time.perf_counter()
    while not stop:
        time.sleep(0.005)
        now = time.perf_counter(); gaps.append(now - last - 0.005); last = now
threading.Thread(target=tick, daemon=True).start()
time.sleep(0.05)
from kiwipiepy import Kiwi
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    started = time.perf_counter(); kiwi = Kiwi(**json.loads(sys.argv[1])); loaded = time.perf_counter()
kiwi.tokenize("한국어 검색"); first = time.perf_counter()
texts = json.loads(sys.stdin.read())
t0 = time.perf_counter()
for text in texts:
    kiwi.tokenize(text)
cut = time.perf_counter() - t0
stop = True
print(json.dumps({"load": loaded - started, "first_cut": first - loaded, "held": max(gaps),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "chars_per_s": sum(map(len, texts)) / cut}))
"""

def drop_from_page_cache() -> None:
    """Ask the kernel to forget the model files' cached pages (clean pages: no privilege needed)."""
    import kiwipiepy_model  # type: ignore[import-untyped]  # ships no type information

    folder = os.path.dirname(kiwipiepy_model.__file__)
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


VARIANTS = {"thread pool (kiwipiepy default, the product)": {}, "calling thread (num_workers=0)": {"num_workers": 0}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="drop the model's files from the page cache first")
    args = parser.parse_args()
    print(machine())
    texts = json.dumps([d["text"] for d in load_corpus().make_corpus(per_lang=10) if d["lang"] == "ko"])
    seen: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    for _ in range(args.rounds):
        for name, options in VARIANTS.items():
            if args.cold:
                drop_from_page_cache()
            done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(options)], input=texts,
                                  capture_output=True, text=True, check=True)
            seen[name].append(json.loads(done.stdout))
    for name, runs in seen.items():
        median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"RESULT korean-analyzer cache={'cold' if args.cold else 'warm'} variant={name!r} rounds={len(runs)} load_s={median['load']:.2f}"
              f" first_cut_s={median['first_cut']:.2f} lock_held_max_s={median['held']:.2f}"
              f" rss_mb={median['rss_mb']:.0f} chars_per_s={median['chars_per_s']:.0f}", flush=True)


if __name__ == "__main__":
    main()
