//! nena-lab: placeholder until its issue lands.
