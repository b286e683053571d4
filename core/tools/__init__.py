"""The tools on top of the contract: the ``indexzoo`` command line and what its commands do.

* :mod:`.cli` - the ``indexzoo`` command: ``list``, ``info``, ``run``, ``bench``, ``check``,
  ``recommend``, ``doctor``;
* :mod:`.bench`, :mod:`.plots`, :mod:`.references`, :mod:`.workloads`, :mod:`.timing` -
  comparing indexes on a workload (``indexzoo bench`` and the pytest-benchmark suite);
  :mod:`.floor_kernel` - the scan floor's CUDA C++ reads (16-byte loads) on the GPU;
  :mod:`.compare` - a run against a saved one (``bench --compare``); :mod:`.pytest_bench` - the
  pytest plugin with the pytest-benchmark fixtures (``--indexzoo-bench-*`` options);
* :mod:`.recommend` - measuring the installed indexes on a user's keys;
* :mod:`.runner` - ``indexzoo run SPEC``; :mod:`.check` - ``indexzoo check NAME``;
* :mod:`.doctor` - what this machine offers; :mod:`.environment` - where a result was measured.
* :mod:`.publish` - how ``bench`` and ``recommend`` write result files (whole, under a free
  name, never through a link); :mod:`.interrupts` - Ctrl-C and SIGTERM.

Nothing below this package (the contract, the kernels, the plugins, the conformance suite)
imports it.
"""
