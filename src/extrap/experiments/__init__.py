"""The study's experiments, one package each, on one shared skeleton that names none of them.

:mod:`.protocol` declares what an experiment is (:class:`~.protocol.ExperimentSpec`); each package
``extrap.experiments.<name>`` exports one spec; :mod:`.registry` lists them (the only place their
names appear outside their folders) and loads a package only when its experiment is asked for.
"""
