//! nena-mptcp: placeholder until its issue lands.
