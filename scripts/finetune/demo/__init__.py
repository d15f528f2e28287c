"""`finetune demo`: every phase of /finetune on embedded toy tasks, on CPU.

:mod:`.run` is the digit task's orchestrator, :mod:`.toolrun` the calculator tool task's; both run on
:mod:`.runner`'s machinery, train with :mod:`.train` and report through :mod:`.report`; :mod:`.task` and
:mod:`.tools` hold the tasks and their tiny models, :mod:`.checker` the digit task's independent reader.
"""
