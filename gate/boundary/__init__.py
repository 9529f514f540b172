"""The trust boundary: where the code of a pull request runs, and what it can never reach.

``ragproof action`` holds the job's credentials and writes the artifacts, the report and the
step's outputs; the pipeline and the ``install`` command come from the pull request. Every
rule that keeps the two apart lives here: the sandbox (:mod:`.sandbox`), the withheld
variables (:mod:`.secrets`), the re-exec with a clean environment (:mod:`.reexec`), the store
directory (:mod:`.store`), the install runner (:mod:`.install`) and the log guard
(:mod:`.logguard`).
"""
