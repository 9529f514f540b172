# The image of the ragproof GitHub Action (a Docker container action).
# The base is an argument so the image can be built where no registry is reachable
# (scripts/container-smoke.sh builds one from Debian's packages). Debian's python3 is 3.11,
# python:3.12-slim has 3.12: both work.
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/ragproof \
    PATH=/opt/ragproof/bin:$PATH

# A virtual environment keeps the action's dependencies apart from the base image's Python
# (and from the pipeline's, which the `install:` input puts in /opt/pipeline, below). The
# dependencies get a layer of their own (read from pyproject.toml), so a change to the
# sources rebuilds only the last layer.
#
# Trimmed in the same layer, since a later layer cannot shrink an earlier one: the test suites
# of numpy and scipy and setuptools (a venv of Debian's python3.11 brings it) are never
# imported by the action. No pip cache (PIP_NO_CACHE_DIR)
# and no build tools (the base has none and every dependency installs as a wheel). The
# compiled .pyc files stay: they save the interpreter recompiling every module at each start.
COPY pyproject.toml /tmp/ragproof-src/
RUN python3 -m venv /opt/ragproof \
    && python3 -c 'import tomllib, sys; print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))' \
        /tmp/ragproof-src/pyproject.toml >/tmp/requirements.txt \
    && /opt/ragproof/bin/pip install --no-cache-dir --only-binary=:all: -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt \
    && /opt/ragproof/bin/pip uninstall --yes --quiet setuptools \
    && find /opt/ragproof/lib/python3*/site-packages/numpy /opt/ragproof/lib/python3*/site-packages/scipy \
        -depth -type d -name tests -exec rm -rf {} + \
    && /opt/ragproof/bin/python -c 'import numpy, scipy.stats, scipy.special, scipy.optimize'

# Untrusted code - the pipeline under test and the `install` command - runs as this unprivileged
# uid, never as root: it cannot write /github/file_commands or /opt/ragproof, and cannot read
# the memory or environment of ragproof's own process. It installs into a virtual environment
# of its own, /opt/pipeline, which sees ragproof's packages through a .pth file (the python
# adapter's worker imports `gate` from there). See docs/action.md, "Security model".
ENV RAGPROOF_PIPELINE_UID=64000 \
    RAGPROOF_PIPELINE_VENV=/opt/pipeline
RUN python3 -m venv /opt/pipeline \
    && /opt/ragproof/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
        >"$(/opt/pipeline/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/ragproof.pth" \
    && chown -R 64000:64000 /opt/pipeline

# Only what the package build needs; see .dockerignore.
COPY setup.py MANIFEST.in README.md /tmp/ragproof-src/
COPY gate /tmp/ragproof-src/gate
COPY examples/demo /tmp/ragproof-src/examples/demo
RUN /opt/ragproof/bin/pip install --no-cache-dir /tmp/ragproof-src \
    && rm -rf /tmp/ragproof-src \
    && ragproof --version

# No USER: GitHub runs Docker actions as the image's default user, with the workspace
# mounted at /github/workspace and that directory as the working directory.
ENTRYPOINT ["ragproof", "action"]
