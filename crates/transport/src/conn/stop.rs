//! Stopping a server cleanly: the signals that ask for it ([`interrupted`]: SIGINT or
//! SIGTERM) and the switch that tells its sessions the grace period is over ([`stop_pair`]:
//! a [`StopSwitch`] the server keeps, a [`StopSignal`] each session waits on).

use tokio::sync::watch;

/// The server's half: [`StopSwitch::wind_down`] tells the sessions the server is stopping
/// (they finish what they carry and take nothing new), [`StopSwitch::stop`] to abort now.
#[derive(Debug)]
pub struct StopSwitch(watch::Sender<Phase>);

/// A session's half: [`StopSignal::stopped`] completes once the server has been told to stop
/// and its grace period is over; [`StopSignal::winding_down`] as soon as it is told to stop.
/// Cloned into every session.
#[derive(Debug, Clone)]
pub struct StopSignal(watch::Receiver<Phase>);

/// Where a server is in its stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Running,
    /// Told to stop: the grace period runs.
    WindingDown,
    /// The grace period is over: abort.
    Stopped,
}

/// A connected switch and signal.
pub fn stop_pair() -> (StopSwitch, StopSignal) {
    let (tx, rx) = watch::channel(Phase::Running);
    (StopSwitch(tx), StopSignal(rx))
}

impl StopSwitch {
    /// Tell every session to stop.
    pub fn stop(&self) {
        self.0.send_replace(Phase::Stopped);
    }

    /// Tell every session that the server is stopping: a session that waits for more work
    /// (a proxy session reused flow after flow) ends now.
    pub fn wind_down(&self) {
        self.0.send_if_modified(|p| {
            let was = *p;
            *p = was.max(Phase::WindingDown);
            *p != was
        });
    }
}

impl StopSignal {
    /// A signal that never fires (a server without a stop switch, tests).
    pub fn never() -> StopSignal {
        stop_pair().1
    }

    /// Completes when the server stops; never, if its switch is gone without stopping.
    pub async fn stopped(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|s| *s == Phase::Stopped).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Completes once the server is told to stop (its grace period begins), or at once if
    /// it was; never, if its switch is gone without stopping.
    pub async fn winding_down(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|s| *s >= Phase::WindingDown).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl Default for StopSignal {
    fn default() -> StopSignal {
        StopSignal::never()
    }
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM (`kill`, systemd's stop), with the signal's name.
/// Fails only if the handlers cannot be installed.
pub async fn interrupted() -> std::io::Result<&'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    })
}

/// From now on SIGTERM becomes SIGINT for the whole process: for a command that stops
/// cleanly (its guards dropped) on SIGINT alone, SIGTERM then does the same.
pub fn sigterm_as_sigint() {
    use nix::sys::signal::{kill, sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    extern "C" fn on_term(_: nix::libc::c_int) {
        // kill and getpid are async-signal-safe.
        let _ = kill(nix::unistd::Pid::this(), Signal::SIGINT);
    }
    let action = SigAction::new(
        SigHandler::Handler(on_term),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handler only calls async-signal-safe functions.
    if let Err(e) = unsafe { sigaction(Signal::SIGTERM, &action) } {
        log::warn!("cannot turn SIGTERM into SIGINT: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_signal_fires_once_stopped_and_never_without_a_switch() {
        let (switch, signal) = stop_pair();
        let waiter = tokio::spawn({
            let s = signal.clone();
            async move { s.stopped().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        switch.stop();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("stopped() completes after stop()")
            .unwrap();
        // A signal whose switch was dropped without stopping stays pending.
        let lone = StopSignal::never();
        assert!(
            tokio::time::timeout(Duration::from_millis(50), lone.stopped())
                .await
                .is_err()
        );
    }
}
