//! The fix for a first-time user's mistake, read from an error's cause: a port another
//! program already listens on (a second proxy client or gateway on the same port), a server
//! address where nothing listens (the server not running, or the wrong port). The CLI adds it
//! to its one-line message, the proxy to its session's log line.

use std::io;

const IN_USE: &str = "another program already listens there (a nena proxy client, gateway \
                      or server still running, or another service): stop it, or give this one \
                      another port";
const NOTHING_LISTENS: &str = "nothing listens there: start the nena server on that host \
                               (`nena serve` or `nena proxy server`), or give the port of its \
                               --listen";

/// The fix for the first cause in `e`'s chain that a user can fix, if any: an address in
/// use anywhere, a refused connection only where it is the one to a nena server (nena-mptcp's
/// connect), not a proxy server's refusal to reach its target.
pub fn fix_for(e: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(e) = c.downcast_ref::<crate::Error>() {
            match e.kind() {
                crate::Error::Io(io) => return in_use(io),
                crate::Error::Mptcp(m) => return fix_of_mptcp(m),
                _ => {}
            }
        }
        if let Some(m) = c.downcast_ref::<nena_mptcp::MptcpError>() {
            return fix_of_mptcp(m);
        }
        if let Some(io) = c.downcast_ref::<io::Error>() {
            return in_use(io);
        }
        cause = c.source();
    }
    None
}

fn in_use(e: &io::Error) -> Option<&'static str> {
    (e.kind() == io::ErrorKind::AddrInUse).then_some(IN_USE)
}

fn fix_of_mptcp(e: &nena_mptcp::MptcpError) -> Option<&'static str> {
    match e {
        nena_mptcp::MptcpError::Connect { source, .. }
            if source.kind() == io::ErrorKind::ConnectionRefused =>
        {
            Some(NOTHING_LISTENS)
        }
        nena_mptcp::MptcpError::Io(io) => in_use(io),
        _ => None,
    }
}

/// `e` on one line (`{:#}`), its fix appended where there is one.
pub fn with_fix(e: &(dyn std::error::Error + 'static), line: String) -> String {
    match fix_for(e) {
        Some(fix) => format!("{line}; {fix}"),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot listen on 127.0.0.1:1080")]
    struct Listening(#[source] io::Error);

    #[test]
    fn the_fix_is_found_under_the_context() {
        let e = Listening(io::Error::from(io::ErrorKind::AddrInUse));
        let line = with_fix(&e, "cannot listen on 127.0.0.1:1080: in use".into());
        assert!(line.starts_with("cannot listen on 127.0.0.1:1080: in use; another program"));
        // A refused connection is the user's to fix only where it is the one to the server.
        let refused = || io::Error::from(io::ErrorKind::ConnectionRefused);
        let to_server = nena_mptcp::MptcpError::Connect {
            remote: "198.18.0.1:4433".parse().unwrap(),
            source: refused(),
        };
        assert!(fix_for(&to_server)
            .unwrap()
            .contains("start the nena server"));
        let wrapped = crate::Error::Mptcp(to_server).handshake();
        assert!(fix_for(&wrapped).unwrap().contains("start the nena server"));
        assert_eq!(fix_for(&refused()), None);
        let in_use = crate::Error::Io(io::Error::from(io::ErrorKind::AddrInUse));
        assert!(fix_for(&in_use).unwrap().starts_with("another program"));
        let other = Listening(io::Error::from(io::ErrorKind::PermissionDenied));
        assert_eq!(fix_for(&other), None);
        assert_eq!(with_fix(&other, "x".into()), "x");
    }
}
