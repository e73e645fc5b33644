"""One-off measurements behind numbers in the docs, each a ``python -m perf.studies.NAME``
script writing to perf-data/results/: ``builder_alone`` and ``builder_floor`` (the TensorRT
builder's own memory), ``phase_ab`` (per-phase A/B of two trees), ``peer_scale`` (the
~3,400-node side by side with Torch-TensorRT), ``declared_ranges_sweep`` (dynamic ranges),
``emulated_counts`` (the count tier on other machines) with ``carried_counts`` (its stack,
packed to carry to a host that lacks it); ``gpu/`` holds the scripts run on the GPU machine."""
