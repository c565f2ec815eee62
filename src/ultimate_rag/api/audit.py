"""Recording changes made through the API, with the key prefix of whoever made them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any
from uuid import UUID

from fastapi import Depends

from ..domain.auth import Principal
from ..domain.ports import AuditTrail
from .deps import AuditTrailDep, PrincipalDep


@dataclass
class Auditor:
    log: AuditTrail
    who: Principal

    async def record(self, action: str, *, knowledge_base_id: UUID | None = None, document_id: UUID | None = None,
                     **detail: Any) -> None:
        await self.log.record(key_prefix=self.who.key_prefix, action=action, knowledge_base_id=knowledge_base_id,
                              document_id=document_id, detail={k: str(v) for k, v in detail.items()})


async def auditor(trail: AuditTrailDep, who: PrincipalDep) -> Auditor:
    return Auditor(trail, who)


AuditDep = Annotated[Auditor, Depends(auditor)]
