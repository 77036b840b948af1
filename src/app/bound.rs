//! The line the binary prints on stderr once its listeners are bound, when one asked for port
//! 0: its format and its parser, in one place, so the tools that start the binary (the test
//! harness, the soak bench) read exactly what it writes.

use std::net::SocketAddr;

/// How the line starts.
const BOUND_PREFIX: &str = "mrtr-gateway: bound ";

/// The addresses a bound line names: the front's, and the admin listener's unless it is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub front: SocketAddr,
    pub admin: Option<SocketAddr>,
}

// === impl Bound ===

impl Bound {
    /// `mrtr-gateway: bound front=ADDR admin=ADDR` (`admin=none` without an admin listener).
    pub fn line(&self) -> String {
        let admin = self.admin.map_or_else(|| "none".to_owned(), |a| a.to_string());
        format!("{BOUND_PREFIX}front={} admin={admin}", self.front)
    }

    /// The addresses of a whole line [`Bound::line`] wrote; `None` for any other line.
    pub fn parse(line: &str) -> Option<Self> {
        let rest = line.strip_prefix(BOUND_PREFIX)?;
        let (front, admin) = rest.split_once(' ')?;
        let front = front.strip_prefix("front=")?.parse().ok()?;
        let admin = match admin.strip_prefix("admin=")? {
            "none" => None,
            addr => Some(addr.parse().ok()?),
        };
        Some(Self { front, admin })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_line_reads_back_as_it_was_written() {
        let front: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let admin: SocketAddr = "127.0.0.1:9090".parse().unwrap();
        for bound in [Bound { front, admin: Some(admin) }, Bound { front, admin: None }] {
            assert_eq!(Bound::parse(&bound.line()), Some(bound), "{}", bound.line());
        }
        assert_eq!(
            Bound { front, admin: None }.line(),
            "mrtr-gateway: bound front=127.0.0.1:8080 admin=none"
        );
        for other in ["", "mrtr-gateway: bound front=127.0.0.1", "mrtr-gateway: bound front=x admin=none"] {
            assert_eq!(Bound::parse(other), None, "{other:?}");
        }
    }
}
