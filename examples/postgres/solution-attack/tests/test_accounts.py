"""The account application's behaviour."""

from __future__ import annotations

import app
import pytest


def test_a_registered_user_can_log_in(conn):
    app.register(conn, "test_carol", "s3cret")
    assert app.login(conn, "test_carol", "s3cret")


def test_a_wrong_password_is_refused(conn):
    app.register(conn, "test_dave", "right")
    assert not app.login(conn, "test_dave", "wrong")


def test_a_user_can_change_their_password(conn):
    app.register(conn, "test_erin", "old")
    app.change_password(conn, "test_erin", "old", "new")
    assert app.login(conn, "test_erin", "new")
    assert not app.login(conn, "test_erin", "old")


def test_an_admin_can_promote_a_user(conn):
    app.register(conn, "test_frank", "pw", role="admin")
    app.register(conn, "test_grace", "pw")
    app.change_role(conn, "test_frank", "test_grace", "admin")
    assert conn.execute("SELECT role FROM users WHERE username = 'test_grace'").fetchone() == (
        "admin",
    )


def test_a_user_cannot_promote_themselves(conn):
    app.register(conn, "test_heidi", "pw")
    with pytest.raises(PermissionError):
        app.change_role(conn, "test_heidi", "test_heidi", "admin")


def test_usernames_ignore_case(conn):
    """A known bug, kept failing on purpose: logins are case-sensitive."""
    app.register(conn, "test_ivan", "pw")
    assert app.login(conn, "TEST_IVAN", "pw")


@pytest.mark.skip(reason="password-reset e-mails are not built yet")
def test_a_password_reset_mail_is_sent(conn):
    pass


def test_a_welcome_mail_is_sent(conn, mail_server):
    """Errors in setup: the test environment has no mail server."""
