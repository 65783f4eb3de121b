# Source on the GPU machine from the repository root: installs the carried wheels (polars for
# the stage tables; the GPU image lacks it) into /tmp/site and points Python at them and at
# KernelBench copy that ships in the package. The GPU worker itself needs only torch and triton.
# Several scripts may source it at once (one per GPU): the install runs once, under a lock, so
# none imports a half-written polars.
if ls .whl/*.whl >/dev/null 2>&1; then
  (
    command -v flock >/dev/null && flock 9
    if [ ! -e /tmp/site/.curate-installed ]; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && touch /tmp/site/.curate-installed
    fi
  ) 9>/tmp/curate-site.lock
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export CURATE_KERNELBENCH=$PWD/curate/data/kernelbench/problems.jsonl
export KB_BASELINE=$PWD/curate/data/kernelbench/baseline_times_h100.json
export PYTHONUNBUFFERED=1
