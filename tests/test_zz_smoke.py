import json, psycopg
from pytest_scoring.db.postgres import admin
from pytest_scoring.db.postgres.diff import Side, diff_databases
def test_smoke(postgres):
    u = postgres.application("CREATE TABLE users (id serial primary key, email text unique, password text); INSERT INTO users (email, password) VALUES ('a@x', 'x'), ('b@x', 'y')")
    db = admin.database_of(u)
    print(admin.refusals(postgres.admin_url, u))
    s1 = admin.snapshot(postgres.admin_url, db)
    with psycopg.connect(u, autocommit=True) as c:
        c.execute("UPDATE users SET password='z' WHERE id=2; INSERT INTO users (email, password) VALUES ('cy@example.com','w')")
    s2 = admin.snapshot(postgres.admin_url, db)
    e = diff_databases(postgres.admin_url, Side(s1.name), Side(s2.name), "appdb")
    print(json.dumps(e, indent=1))
