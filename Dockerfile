# The multiturn-eval GitHub Action image (also usable as `docker run ... multiturn-eval`).
# BASE_IMAGE: any Debian-like image with python3 (>= 3.11), pip and venv; the project's CI
# builds it on a base made with debootstrap. Both stages use the same base (the venv points at
# its python). No WORKDIR or USER: the runner mounts the workspace, sets the working directory
# and runs the container as root; the action hands its files back to the workspace's owner.
ARG BASE_IMAGE=python:3.12-slim

FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
# Dependencies first (every backend: the [all] extra), in their own layer, so a change to the
# code alone does not reinstall them (numpy's and scipy's own test suites, ~50 MB, are left
# out); then the package itself without its dependencies.
COPY pyproject.toml /src/
RUN python3 -m venv /opt/multiturn-eval \
    && python3 -c "import tomllib; p = tomllib.load(open('/src/pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['all']))" > /tmp/requirements.txt \
    && /opt/multiturn-eval/bin/pip install --no-cache-dir -r /tmp/requirements.txt \
    && find /opt/multiturn-eval/lib/python3*/site-packages/numpy \
        /opt/multiturn-eval/lib/python3*/site-packages/scipy \
        -depth -type d -name tests -exec rm -rf {} + \
    && rm /tmp/requirements.txt
COPY README.md /src/
COPY runner /src/runner
# the JSON Schemas ship inside the package (runner/multiturn_eval/schemas links here)
COPY schemas /src/schemas
RUN /opt/multiturn-eval/bin/pip install --no-cache-dir --no-deps /src \
    && /opt/multiturn-eval/bin/pip check \
    && /opt/multiturn-eval/bin/multiturn-eval --version

# The final image: the base plus the installed virtual environment, nothing else (no sources,
# no build tools, no pip cache).
FROM ${BASE_IMAGE}
ENV PATH=/opt/multiturn-eval/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
COPY --from=build /opt/multiturn-eval /opt/multiturn-eval
COPY entrypoint.sh /entrypoint.sh
ENTRYPOINT ["/entrypoint.sh"]
