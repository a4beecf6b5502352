//! Free loopback ports, and a plain HTTP GET on one (the admin endpoints of processes under test).

use std::net::TcpListener;

use crate::{Error, Result};

/// Picks a free port for a process the test bed starts next, which binds it itself.
///
/// The port is taken from outside the kernel's ephemeral range (`net.ipv4.ip_local_port_range`,
/// 32768–60999 by default). The kernel hands ports of that range to every outgoing connection and every
/// bind to port 0, so a port picked there can be taken by any connection made between the pick and the
/// process's own bind: a bench once lost its registry that way ("bind: address already in use"). Outside
/// the range only another explicit pick can take it, and each pick is random and checked by binding
/// `0.0.0.0` (which fails while any address holds the port). Where the range leaves no room, the kernel
/// picks.
pub fn free_port() -> Result<u16> {
    if let Some((low, high)) = outside(ephemeral_range()) {
        for _ in 0..256 {
            let port = fastrand::u16(low..=high);
            if TcpListener::bind(("0.0.0.0", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(Error::io("binding a free port", "127.0.0.1:0"))?;
    let port = listener
        .local_addr()
        .map_err(Error::io("reading a bound port", "127.0.0.1:0"))?
        .port();
    Ok(port)
}

/// The lowest port picked: below it lie well-known services' ports.
const LOWEST: u16 = 10000;

/// The kernel's ephemeral port range, or Linux's default where it cannot be read.
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| parse_range(&s))
        .unwrap_or((32768, 60999))
}

/// `ip_local_port_range`'s two numbers.
fn parse_range(s: &str) -> Option<(u16, u16)> {
    let mut it = s.split_whitespace().map(str::parse::<u16>);
    Some((it.next()?.ok()?, it.next()?.ok()?))
}

/// The larger stretch of ports from [`LOWEST`] up that lies outside `ephemeral`, when it holds at
/// least a thousand ports.
fn outside((low, high): (u16, u16)) -> Option<(u16, u16)> {
    let below = (low > LOWEST).then(|| (LOWEST, low - 1));
    let above = (high < u16::MAX).then(|| (high.saturating_add(1).max(LOWEST), u16::MAX));
    [below, above]
        .into_iter()
        .flatten()
        .filter(|(a, b)| b >= a && b - a >= 1000)
        .max_by_key(|(a, b)| b - a)
}

/// `GET http://127.0.0.1:<port><path>`: the status code and body, or `None` while nothing answers.
pub async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).await.ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.ok()?;
    let code = buf.split(' ').nth(1)?.parse().ok()?;
    Some((code, buf.split_once("\r\n\r\n")?.1.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_picked_outside_the_ephemeral_range() {
        assert_eq!(outside((32768, 60999)), Some((10000, 32767)));
        assert_eq!(outside((1024, 50000)), Some((50001, 65535)));
        assert_eq!(outside((1024, 65535)), None);
        assert_eq!(parse_range("32768\t60999\n"), Some((32768, 60999)));
        assert_eq!(parse_range("x"), None);
        let port = free_port().expect("a free port");
        let (low, high) = ephemeral_range();
        if outside((low, high)).is_some() {
            assert!(!(low..=high).contains(&port), "{port} lies in {low}-{high}");
        }
        TcpListener::bind(("127.0.0.1", port)).expect("the picked port binds");
    }
}
