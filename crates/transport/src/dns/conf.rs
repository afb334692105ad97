//! resolv.conf, sans-IO: the `nameserver` lines, as the C library reads them (a line that
//! does not name an address is skipped). The names resolver asks each of them it may (a
//! trusted interface's); the proxy server's resolver, the first.

use std::net::IpAddr;

/// The nameservers of a resolv.conf (`text`), in file order: comments begin with `#` or
/// `;`; an IPv6 address may carry a `%scope`, dropped.
pub fn nameservers(text: &str) -> Vec<IpAddr> {
    text.lines()
        .filter_map(|line| {
            let line = line.split(['#', ';']).next()?;
            let mut words = line.split_whitespace();
            if words.next()? != "nameserver" {
                return None;
            }
            let addr = words.next()?;
            addr.split('%').next()?.parse().ok()
        })
        .collect()
}
