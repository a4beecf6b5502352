//! Free loopback ports.

use std::net::TcpListener;

use crate::{Error, Result};

/// Asks the kernel for a free port on 127.0.0.1. The port is free when this returns; the process that
/// binds it next is started right after, so the window for a clash is small.
pub(crate) fn free_port() -> Result<u16> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(Error::io("binding a free port", "127.0.0.1:0"))?;
    let port = listener
        .local_addr()
        .map_err(Error::io("reading a bound port", "127.0.0.1:0"))?
        .port();
    Ok(port)
}
