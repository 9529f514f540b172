"""Test servers on 127.0.0.1 (GitHub REST API, judge, pipeline, proxy) shared by the tests."""
