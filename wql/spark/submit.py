"""``spark-submit`` entry point for ``wql run``.

spark-submit runs Python *files*; this one is ``wql run`` with the session
spark-submit configured (master, deploy mode, resources)::

    spark-submit --master yarn "$(python -c 'import wql.spark.submit as m; print(m.__file__)')" \\
        jobs/sessions.wql --output hdfs:///wql/out

Every ``wql run`` option works, except that ``--master`` is spark-submit's.
"""

from __future__ import annotations

import sys

from wql.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
