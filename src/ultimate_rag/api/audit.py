"""Recording changes made through the API, with the key prefix of whoever made them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any
from uuid import UUID

from fastapi import Depends

from ..adapters.postgres.audit import AuditLog
from ..domain.auth import Principal
from .deps import ContainerDep, PrincipalDep


@dataclass
class Auditor:
    log: AuditLog
    who: Principal

    async def record(self, action: str, *, knowledge_base_id: UUID | None = None, document_id: UUID | None = None,
                     **detail: Any) -> None:
        await self.log.record(key_prefix=self.who.key_prefix, action=action, knowledge_base_id=knowledge_base_id,
                              document_id=document_id, detail={k: str(v) for k, v in detail.items()})


async def auditor(container: ContainerDep, who: PrincipalDep) -> Auditor:
    return Auditor(container.audit, who)


AuditDep = Annotated[Auditor, Depends(auditor)]
