"""The study's experiments, one package each, on one shared skeleton that names none of them.

:mod:`.protocol` declares what an experiment is (:class:`~.protocol.ExperimentSpec`); each package
``extrap.experiments.<name>`` exports one spec; :mod:`.registry` lists them (the only place their
names appear outside their folders) and loads a package only when its experiment is asked for.

A package holds all of its experiment (``rope_base/`` and ``extension/`` are the pattern), one module per part:

* ``__init__.py``: ``SPEC`` only, ``package_spec(__name__, name=..., citation=...)`` built on first use
  (:func:`.assemble.lazy`): :mod:`.assemble` reads each part from the modules below by its conventional name (a
  missing one is a TypeError naming it);
* ``about.py``: ``ABOUT``, what ``extrap study --help`` says of it (:class:`~.protocol.About`: its summary and,
  per option it honours, what it takes), with ``DEFAULT_PES`` or ``METHODS``; it imports the protocol only, so
  the help loads no experiment;
* ``presets.py``: its settings record and ``PRESETS`` {preset: settings}; what several
  experiments share (the cpu model, :data:`extrap.study.presets.CPU_MODEL`) stays in :mod:`extrap.study.presets`;
* ``plan.py``: ``build(request) -> Experiment`` (the checks before anything is trained, the jobs), the worker
  (module level: spawned processes import it), its progress line and ``assemble`` (results.json);
* ``measure.py``: what it measures on one model; ``records.py``: a worker's job and output when the shared
  ones (:class:`extrap.study.models.ModelJob`, :class:`~extrap.study.models.ModelOutput`) do not fit;
* ``results.py``: its block of results.json (frozen records with ``to_json``/``from_json``), declared as
  ``RESULTS = ResultsBlock(key, Block)``: StudyResults keeps its raw JSON under ``key``, the plan writes it
  with ``RESULTS.entry(block)`` and
  ``block(results)`` reads it (empty when absent); its ``rows``, ``first_rows`` and ``errors`` are its lines of
  results.csv and of the page's list of what failed;
* ``claims.py``: the checklist's claims; ``tables.py``: the tables the page and the README share;
  ``figures.py``: ``figures(results, notes, out_dir)``, its figures (curves and axes shared with others in
  :mod:`extrap.report.panels`); ``page.py``: the fragment's ``context``, ``missing``, ``SECTIONS`` (and
  ``anchor``), with ``<name>.html.j2``; ``readme.py``: its README block, ``markdown`` between ``BEGIN`` and ``END``.

``extrapolation/`` (with ``alibi-slopes``) declares a :class:`~extrap.results.blocks.SpreadBlock`: its sections
(theory, erf, spearman, slopes, timing) are results.json's own top-level keys, interleaved with the shared ones
since the first version, and the block places each where it always stood, so every committed file re-serialises
byte for byte and a file written now keeps their order.

An experiment may import another one (extension trains and measures with rope-base's code); a shared module
never imports an experiment.  One model per PE trained on a task mix is shared skeleton
(:mod:`extrap.study.models`: the job, the output, the checks, results.json's shared sections).
"""
