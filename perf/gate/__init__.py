"""The regression gate (docs/regressions.md): ``suites`` says what is measured, ``measure``
runs inside each fresh process that ``worker`` forks, ``runner`` runs a suite and ``store``
keeps the run history (perf-data/history); ``noise``, ``changepoints`` and ``steps`` model
that history, ``rules`` holds the screen and A/B rules as pure functions, ``confirm``
re-measures a suspect against the base commit and ``verdict`` chains one gate run;
``dashboard``/``plots`` render the history, ``families``/``inject`` feed the converter-family
groups and the test-only slowdowns, ``counting`` the count tier's measurement (interpreted
work counted in a count server's child), ``sensitivity``/``count_sensitivity``/``replays``
check the gate itself."""
