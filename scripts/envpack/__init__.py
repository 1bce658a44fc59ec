"""The work of scripts/pack-env (scripts/pack_env.py is its command line): what goes into the
archive (`inputs`), the fresh venv it is made of (`venv`), writing and checking the tar.gz
(`archive`), and one build with its lock and up-to-date check (`pack`).

It lives beside the script, not in `etl/`, because it is a build tool and not part of the job
the archive ships; it needs only the standard library (and pip), so `python3
scripts/pack_env.py` works in a node's image without .venv or the project installed.
"""
