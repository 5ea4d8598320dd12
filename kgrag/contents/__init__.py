"""What each step puts in its artefact folder: one module per artefact.

A module names its artefact's files and vector tables, the columns its readers rely
on, and the functions that write and read it. Steps write an artefact only through
its module, and strategies, the evaluation, bundles and the API read it only
through it, so that a file or table name is spelled once, here, and a reader never
imports it from the step or the strategy that happens to use it too.

This is not ``kgrag.pipeline.artefacts``: that module is about the folders
themselves (where a step's folder goes, the atomic rename that publishes it, the
build record in every one), whatever is inside them. This package is about what is
inside. The file names and contents are part of every landed run: changing one
strands the artefact folders built before, so a change here is a change of the
writing step's version.

A new artefact, such as a model a step trains, is a new module here: its file
names, the ``write_…`` its step calls and the ``read_…`` or ``open_…`` its users call.
"""
