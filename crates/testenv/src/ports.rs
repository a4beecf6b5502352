//! Free loopback ports, and a plain HTTP GET on one (the admin endpoints of processes under test).

use std::net::TcpListener;

use crate::{Error, Result};

/// Asks the kernel for a free port on 127.0.0.1. The port is free when this returns; the process that
/// binds it next is started right after, so the window for a clash is small.
pub fn free_port() -> Result<u16> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(Error::io("binding a free port", "127.0.0.1:0"))?;
    let port = listener
        .local_addr()
        .map_err(Error::io("reading a bound port", "127.0.0.1:0"))?
        .port();
    Ok(port)
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
