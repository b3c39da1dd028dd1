"""Permission sources: the systems that grant an agent its access (a database, a cloud account,
an identity provider), read and corrected where the grant is made, not where the agent says."""
