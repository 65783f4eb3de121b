"""Parse rates of the standard library's ``ast`` and of libcst on torch's own ``nn`` sources
(CPU seconds, best of 3): why mining indexes with ``ast`` and dedup reads tokens, not trees.

    python benchmarks/parse_rate.py
"""
import ast, time, pathlib, libcst, torch
files=sorted(pathlib.Path(torch.__file__).parent.joinpath("nn").rglob("*.py"))
srcs=[f.read_text() for f in files]; mb=sum(len(s.encode()) for s in srcs)/1e6
def rate(fn):
    best=1e9
    for _ in range(3):
        t=time.process_time(); [fn(s) for s in srcs]; best=min(best,time.process_time()-t)
    return best
a=rate(ast.parse); c=rate(libcst.parse_module)
print(f"{len(srcs)} files, {mb:.2f} MB; ast {mb/a:.2f} MB/CPU-s; libcst {mb/c:.2f} MB/CPU-s; ratio {c/a:.1f}x")
