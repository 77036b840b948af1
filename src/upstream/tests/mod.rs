//! Loopback tests of the upstream client against a scripted legacy server.
