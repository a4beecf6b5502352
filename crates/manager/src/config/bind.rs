//! Listen addresses for the admin server, in controller-runtime's spelling.
//!
//! `:8080` means every interface, `127.0.0.1:8080` one interface, and `0` turns the listener off.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;

/// Where a listener binds, or that it is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindAddress {
    /// The listener is off (`0`).
    Disabled,
    /// Listen on this address; port 0 picks a free port.
    Addr(SocketAddr),
}

impl BindAddress {
    /// The socket address, unless the listener is off.
    pub fn addr(&self) -> Option<SocketAddr> {
        match self {
            Self::Disabled => None,
            Self::Addr(a) => Some(*a),
        }
    }
}

/// Why a bind address did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid bind address {0:?}: expected host:port, :port, or 0 to disable")]
pub struct ParseBindAddressError(String);

impl FromStr for BindAddress {
    type Err = ParseBindAddressError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s == "0" {
            return Ok(Self::Disabled);
        }
        if let Some(port) = s.strip_prefix(':') {
            let port = port.parse().map_err(|_| ParseBindAddressError(s.to_owned()))?;
            return Ok(Self::Addr(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                port,
            )));
        }
        s.parse()
            .map(Self::Addr)
            .map_err(|_| ParseBindAddressError(s.to_owned()))
    }
}

impl fmt::Display for BindAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Disabled => f.write_str("0"),
            Self::Addr(a) => a.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_controller_runtime_forms() {
        assert_eq!("0".parse(), Ok(BindAddress::Disabled));
        assert_eq!(
            ":8080".parse::<BindAddress>().ok().and_then(|b| b.addr()),
            Some(SocketAddr::from(([0, 0, 0, 0], 8080)))
        );
        assert_eq!(
            "127.0.0.1:0".parse::<BindAddress>().ok().and_then(|b| b.addr()),
            Some(SocketAddr::from(([127, 0, 0, 1], 0)))
        );
        assert_eq!(
            "[::1]:9"
                .parse::<BindAddress>()
                .ok()
                .and_then(|b| b.addr())
                .map(|a| a.port()),
            Some(9)
        );
        assert!("8080".parse::<BindAddress>().is_err());
        assert!(":http".parse::<BindAddress>().is_err());
    }
}
