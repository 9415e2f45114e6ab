"""Small pieces every program of the suite shares: structured logging, metrics endpoint."""
