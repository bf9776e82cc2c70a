"""GitHub Actions integration: the action's entry point and its pieces.

``action``       inputs -> install -> run -> outputs, summary, annotations, comment
``inputs``       ``INPUT_*`` variables -> validated :class:`~.inputs.ActionInputs`
``commands``     workflow commands and their escaping, ``::stop-commands::``
``files``        ``$GITHUB_OUTPUT`` (random heredoc delimiters), ``$GITHUB_STEP_SUMMARY``
``annotations``  failing turns -> ranked error annotations (pure)
``comment``      which pull request, the sticky comment (find, update or create)
``client``       the small REST client (pagination, rate limits, bounded retries)

Run it with ``python -m multiturn_eval.github`` (``entrypoint.sh`` does).
"""
