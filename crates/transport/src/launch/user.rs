//! Whom `nena run` starts CMD as. `nena run` needs root (cgroups, BPF), but CMD need not:
//! under sudo it runs as the user who called sudo (`SUDO_UID`, `SUDO_GID`, and that user's
//! supplementary groups, `HOME`, `USER`, `LOGNAME` and `SHELL` from the passwd database),
//! `--user NAME|UID` names the user explicitly, and plain root with neither keeps CMD as
//! root and says so once. The identity is looked up before the fork; the child only makes
//! system calls ([`PrivilegeDrop::drop_privileges`]) after it joined its cgroup, whose membership
//! (and so the BPF programs that carry its traffic) does not depend on its user, and which
//! it can no longer leave (the cgroup files are root's).

use anyhow::{anyhow, bail, Result};
use nix::unistd::{Gid, Uid, User};
use std::ffi::CString;
use std::path::PathBuf;

/// The user CMD runs as, looked up in the parent: the privilege drop the child makes
/// ([`RunAs::drop_privileges`]) before it runs CMD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (the primary group included, as `id -G` lists them).
    pub groups: Vec<u32>,
    /// From the passwd database, when the user has an entry there.
    pub name: Option<String>,
    pub home: Option<PathBuf>,
    pub shell: Option<PathBuf>,
}

/// One entry of the passwd database, by name or by uid.
fn passwd(name: Option<&str>, uid: u32) -> Result<Option<User>> {
    if name.is_some_and(|n| n.contains('\0')) {
        bail!("a user name with a NUL byte");
    }
    let found = match name {
        Some(n) => User::from_name(n),
        None => User::from_uid(Uid::from_raw(uid)),
    };
    found.map_err(|e| anyhow!("reading the passwd database: {}", std::io::Error::from(e)))
}

/// The groups of `name` whose primary group is `gid` (getgrouplist).
fn groups_of(name: &str, gid: u32) -> Result<Vec<u32>> {
    let c = CString::new(name).map_err(|_| anyhow!("a user name with a NUL byte"))?;
    let groups = nix::unistd::getgrouplist(&c, Gid::from_raw(gid))
        .map_err(|_| anyhow!("{name} is in too many groups"))?;
    Ok(groups.into_iter().map(Gid::as_raw).collect())
}

/// The effective uid of this process (0: root).
pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

impl RunAs {
    fn from_passwd(p: User, gid: u32) -> Result<RunAs> {
        let mut groups = groups_of(&p.name, gid)?;
        if !groups.contains(&gid) {
            groups.insert(0, gid);
        }
        Ok(RunAs {
            uid: p.uid.as_raw(),
            gid,
            groups,
            name: Some(p.name),
            home: Some(p.dir),
            shell: Some(p.shell),
        })
    }

    /// A uid with no passwd entry: its group alone, home `/`.
    fn bare(uid: u32, gid: u32) -> RunAs {
        RunAs {
            uid,
            gid,
            groups: vec![gid],
            name: None,
            home: None,
            shell: None,
        }
    }

    /// The environment CMD gets on top of nena's (which the caller passes on).
    pub fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        let name = self.name.clone().unwrap_or_else(|| self.uid.to_string());
        let home = self.home.clone().unwrap_or_else(|| PathBuf::from("/"));
        let mut v = vec![
            ("HOME", home.into_os_string()),
            ("USER", name.clone().into()),
            ("LOGNAME", name.into()),
        ];
        if let Some(s) = &self.shell {
            v.push(("SHELL", s.clone().into_os_string()));
        }
        v
    }

    /// What the child does to become this user ([`PrivilegeDrop::drop_privileges`]), made
    /// here in the parent so that the child only makes system calls.
    pub fn privilege_drop(&self) -> PrivilegeDrop {
        PrivilegeDrop {
            uid: Uid::from_raw(self.uid),
            gid: Gid::from_raw(self.gid),
            groups: self.groups.iter().copied().map(Gid::from_raw).collect(),
        }
    }
}

/// The privilege drop as the child makes it: made in the parent
/// ([`RunAs::privilege_drop`]), moved into the child's pre-exec closure.
#[derive(Debug, Clone)]
pub struct PrivilegeDrop {
    uid: Uid,
    gid: Gid,
    groups: Vec<Gid>,
}

impl PrivilegeDrop {
    /// The groups, then the group, then the user (real, effective and saved); then checks
    /// that root cannot be regained. Only system calls, no allocation: for the child
    /// between fork and exec.
    pub fn drop_privileges(&self) -> std::io::Result<()> {
        use nix::unistd::{setgroups, setresgid, setresuid, setuid};
        setgroups(&self.groups)?;
        setresgid(self.gid, self.gid, self.gid)?;
        setresuid(self.uid, self.uid, self.uid)?;
        // Root cannot be regained.
        if setuid(Uid::from_raw(0)).is_ok() && !self.uid.is_root() {
            return Err(nix::errno::Errno::EPERM.into());
        }
        Ok(())
    }
}

/// What decided whom CMD runs as, for the one line nena logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// `--user`.
    Named,
    /// `SUDO_UID` (nena runs under sudo).
    Sudo,
}

/// Whom CMD runs as: `user` (`--user`), else under sudo (`sudo_uid`, `sudo_gid` from the
/// environment, with `euid` 0) the user who called it; None: as nena itself (root with
/// neither: the caller says so). Errors: an unknown user, a malformed SUDO_UID or
/// SUDO_GID, `--user` for another user without root.
pub fn resolve(
    user: Option<&str>,
    sudo_uid: Option<&str>,
    sudo_gid: Option<&str>,
    euid: u32,
) -> Result<Option<(RunAs, Why)>> {
    if let Some(u) = user {
        let p = match u.parse::<u32>() {
            Ok(uid) => passwd(None, uid)?.ok_or_else(|| {
                anyhow!("--user {uid}: no user has this uid in the passwd database")
            })?,
            Err(_) => passwd(Some(u), 0)?
                .ok_or_else(|| anyhow!("--user {u}: no such user in the passwd database"))?,
        };
        if p.uid.as_raw() != euid && euid != 0 {
            bail!(
                "--user {u}: nena run is not root (uid {euid}), so it cannot start CMD as \
                 another user"
            );
        }
        let gid = p.gid.as_raw();
        return Ok(Some((RunAs::from_passwd(p, gid)?, Why::Named)));
    }
    if euid != 0 {
        return Ok(None);
    }
    let Some(uid) = sudo_uid else {
        return Ok(None);
    };
    let uid: u32 = uid
        .trim()
        .parse()
        .map_err(|_| anyhow!("SUDO_UID={uid:?} is not a uid (unset it, or pass --user)"))?;
    let gid: Option<u32> = match sudo_gid {
        Some(g) => Some(
            g.trim()
                .parse()
                .map_err(|_| anyhow!("SUDO_GID={g:?} is not a gid (unset it, or pass --user)"))?,
        ),
        None => None,
    };
    if uid == 0 {
        return Ok(None);
    }
    let r = match passwd(None, uid)? {
        Some(p) => {
            let gid = gid.unwrap_or(p.gid.as_raw());
            RunAs::from_passwd(p, gid)?
        }
        None => RunAs::bare(uid, gid.unwrap_or(uid)),
    };
    Ok(Some((r, Why::Sudo)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sudo_names_the_user_and_plain_root_stays_root() {
        // nobody is 65534 on Debian; root is 0 everywhere.
        let (r, why) = resolve(None, Some("65534"), Some("65534"), 0)
            .unwrap()
            .unwrap();
        assert_eq!(why, Why::Sudo);
        assert_eq!((r.uid, r.gid), (65534, 65534));
        assert!(r.groups.contains(&65534), "{r:?}");
        assert!(!r.groups.contains(&0), "no group of root's: {r:?}");
        let env = r.env();
        assert!(env.iter().any(|(k, _)| *k == "HOME"));
        assert_eq!(resolve(None, None, None, 0).unwrap(), None);
        assert_eq!(resolve(None, Some("0"), Some("0"), 0).unwrap(), None);
        // Not root: SUDO_UID means nothing (nena cannot change users anyway).
        assert_eq!(resolve(None, Some("65534"), None, 1000).unwrap(), None);
        // A uid without a passwd entry: its own group, home /.
        let (r, _) = resolve(None, Some("4000000"), Some("4000001"), 0)
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.uid, r.gid, r.groups.clone()),
            (4000000, 4000001, vec![4000001])
        );
        assert!(r.env().contains(&("HOME", "/".into())));
    }

    #[test]
    fn user_by_name_or_uid_and_bad_input_is_refused() {
        let (by_name, why) = resolve(Some("root"), Some("65534"), None, 0)
            .unwrap()
            .unwrap();
        assert_eq!(why, Why::Named, "--user wins over SUDO_UID");
        assert_eq!(by_name.uid, 0);
        let (by_uid, _) = resolve(Some("65534"), None, None, 0).unwrap().unwrap();
        assert_eq!(by_uid.uid, 65534);
        assert_eq!(by_uid.name.as_deref(), Some("nobody"));
        let e = resolve(Some("no-such-user-nena"), None, None, 0).unwrap_err();
        assert!(e.to_string().contains("no such user"), "{e}");
        let e = resolve(Some("4000000"), None, None, 0).unwrap_err();
        assert!(e.to_string().contains("no user has this uid"), "{e}");
        let e = resolve(None, Some("abc"), None, 0).unwrap_err();
        assert!(e.to_string().contains("SUDO_UID"), "{e}");
        let e = resolve(None, Some("65534"), Some("x"), 0).unwrap_err();
        assert!(e.to_string().contains("SUDO_GID"), "{e}");
        let e = resolve(Some("nobody"), None, None, 1000).unwrap_err();
        assert!(e.to_string().contains("not root"), "{e}");
    }
}
