//! Shared harness of the integration tests.
