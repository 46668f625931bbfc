"""The hashes of basic authentication, against OpenSSL's apr1 and the C library's crypt(3)."""

from __future__ import annotations

import pytest

from emubroker.auth.basic import parse_users
from emubroker.auth.errors import SecurityConfigError
from emubroker.auth.htpasswd import apr1_crypt, check_password, des_crypt

# `openssl passwd -apr1 -salt SALT PASSWORD`
APR1 = [
    (b"123456", "FG4AO6aX", "$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf."),
    (b"pw", "abc", "$apr1$abc$NKxAkoTtUloZMd1uGIvNG0"),
    (b"", "12345678", "$apr1$12345678$sHuPAw7VA9xjRbJz7zKV7/"),
]
# glibc crypt(3) (perl -e 'print crypt(PASSWORD, SALT)'): only 8 characters count.
DES = [
    (b"123456", "ab", "ab01FAX.bQRSU"),
    (b"password", "./", "./xZjzHv5vzVE"),
    (b"a-very-long-password", "zZ", "zZmmSRhzUqOSc"),
    (b"a-very-l", "zZ", "zZmmSRhzUqOSc"),
    (b"", "aa", "aaQSqAReePlq6"),
    (b"test", "Xy", "Xy84zCXgG74kA"),
]


@pytest.mark.parametrize(("password", "salt", "expected"), APR1)
def test_apr1_matches_openssl(password: bytes, salt: str, expected: str) -> None:
    assert apr1_crypt(password, salt) == expected


@pytest.mark.parametrize(("password", "salt", "expected"), DES)
def test_des_crypt_matches_the_c_library(password: bytes, salt: str, expected: str) -> None:
    assert des_crypt(password, salt) == expected


def test_check_password_accepts_only_the_right_password() -> None:
    assert check_password("123456", "$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.")
    assert not check_password("1234567", "$apr1$FG4AO6aX$KGYPuMoLUou3i6vUkPUUf.")
    assert check_password("123456", "ab01FAX.bQRSU")
    assert not check_password("123457", "ab01FAX.bQRSU")


@pytest.mark.parametrize(
    "stored",
    [
        "$2y$05$abcdefghijklmnopqrstuuJ5ZrM1L8L8lWzYtm/5J9b1Gq0cQm1y",  # bcrypt: Pulsar's DES path
        "{SHA}fEqNCco3Yq9h5ZUglD3CZJT4lBs=",  # SHA: same
        "$apr1$onlythree",  # malformed apr1
        "",
    ],
)
def test_formats_pulsar_does_not_accept_never_match(stored: str) -> None:
    assert not check_password("123456", stored)


def test_users_file_lines_must_be_user_colon_hash() -> None:
    assert parse_users("admin:x\nbob:y") == {"admin": "x", "bob": "y"}
    with pytest.raises(SecurityConfigError, match="format of the password auth conf"):
        parse_users("admin:x:y")
