"""PostgreSQL databases (issue 31): the evaluator's admin operations, reading, the diff.

psycopg 3 (the ``postgres`` extra) is imported by these modules only: nothing else of the
package loads them unless a PostgreSQL database is scored.
"""
