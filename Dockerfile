# The multiturn-eval GitHub Action image (also usable as `docker run ... multiturn-eval`).
# BASE_IMAGE: any Debian-like image with python3 (>= 3.11), pip and venv; CI builds it on a
# base made with debootstrap. Both stages must use the same base (the venv points at its python).
# No WORKDIR or USER: the runner mounts the workspace, sets the working directory and runs as root.
ARG BASE_IMAGE=python:3.12-slim

FROM ${BASE_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
COPY pyproject.toml README.md /src/
COPY runner /src/runner
# Every backend is included ([all]); the wheel is built here so the final image gets no
# source tree, build tools or pip cache, only the installed virtual environment.
RUN python3 -m venv /opt/multiturn-eval \
    && /opt/multiturn-eval/bin/pip install --no-cache-dir "/src[all]" \
    && /opt/multiturn-eval/bin/multiturn-eval --version

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
