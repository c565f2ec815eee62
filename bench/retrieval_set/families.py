"""The identifier family (written for this repository, CC0): many near-identical documents written
from one template that differ only in their identifiers — support tickets, repair orders, purchase
orders, release notes, error codes — and questions naming one of them, in English, Chinese and
Korean, spelled as people type them (lower case, full width, a space for the hyphen). Nothing but
the identifier tells the right document from its neighbours, so a near miss is a wrong answer.

``FAMILY_DOCUMENTS``: ``key -> (filename, paragraphs)`` as in ``documents.py``; ``FAMILY_QUESTIONS``:
``(question, key, "identifier_family")``. ``bench/retrieval.py`` indexes them in a knowledge base of
their own, so the main set's numbers stay comparable with earlier runs.
"""

from __future__ import annotations

KIND = "identifier_family"

_TICKET = ("Support ticket {n}. The customer reports that after the latest update the mobile app signs them out "
           "every few minutes and the session token is rejected. Priority: high. Status: waiting for engineering.")
_REPAIR = "维修工单 {n}：三号楼二层的空调室外机噪音过大，夜间影响住户休息。已派维修人员上门检查风扇和减震垫。"
_ORDER = "주문번호 {n}: 사무용 의자 20개와 책상 10개를 본사 3층으로 배송 요청합니다. 배송 예정일은 다음 주 월요일입니다."
_RELEASE = ("Release notes {n}. This release fixes the login timeout on slow networks, updates the bundled "
            "certificates and improves the speed of the search page.")
_ERROR = ("Error {n} on the dosing pump: the pressure sensor reports a value outside its range. Check the sensor "
          "cable, then restart the pump. If the error comes back, replace the sensor.")

TICKETS = [f"SR-{n}" for n in range(88340, 88352)]
REPAIRS = [f"WX-2024-{n:04d}" for n in range(311, 319)]
ORDERS = [f"ORD-7731-{n:02d}" for n in range(1, 9)]
RELEASES = ["v2.13.0", "v2.13.1", "v2.14.0", "v2.14.1", "v2.14.2", "v2.15.0"]
ERRORS = [f"E{n}" for n in range(1231, 1237)]

FAMILY_DOCUMENTS: dict[str, tuple[str, list[str]]] = {
    **{t: (f"ticket-{t}.txt", [_TICKET.format(n=t)]) for t in TICKETS},
    **{r: (f"工单-{r}.txt", [_REPAIR.format(n=r)]) for r in REPAIRS},
    **{o: (f"주문-{o}.txt", [_ORDER.format(n=o)]) for o in ORDERS},
    **{v: (f"release-{v}.md", [f"# Release {v}", _RELEASE.format(n=v)]) for v in RELEASES},
    **{e: (f"pump-error-{e}.md", [f"# Pump error {e}", _ERROR.format(n=e)]) for e in ERRORS},
    # an order form that names two tickets: it holds their numbers too, and is not what they ask for
    "order_form": ("order-form-PO-2024-00017.txt", [
        "Purchase order PO-2024-00017: replacement phones for the staff whose app keeps signing them out, "
        "see tickets SR-88340 and SR-88351. Delivery to the service desk."]),
}

_TICKET_QUESTIONS = ["{n} 是什么问题？", "What is ticket {n} about?", "{n} 티켓은 어떤 문제인가요?"]
_SPELLINGS = [lambda t: t.lower().replace("-", " "), lambda t: t.translate(str.maketrans(
    "SR-0123456789", "ＳＲ－０１２３４５６７８９")), lambda t: t.replace("-", "")]

FAMILY_QUESTIONS: list[tuple[str, str, str]] = [
    *[(_TICKET_QUESTIONS[i % 3].format(n=t), t, KIND) for i, t in enumerate(TICKETS)],
    *[(f"工单{spell(t)}的处理进度", t, KIND) for t, spell in zip(TICKETS[1::4], _SPELLINGS, strict=True)],
    *[(q.format(n=r), r, KIND) for r, q in zip(REPAIRS, ["{n}的维修情况怎么样？", "What is repair order {n} about?",
                                                         "{n} 수리 요청은 무엇인가요?", "{n}"] * 2, strict=True)],
    *[(q.format(n=o), o, KIND) for o, q in zip(ORDERS, ["{n} 배송 예정일은 언제인가요?", "When is order {n} delivered?",
                                                        "订单{n}什么时候送到？", "{n}"] * 2, strict=True)],
    *[(q.format(n=v), v, KIND) for v, q in zip(RELEASES, ["What changed in {n}?", "{n} 版本修复了什么？",
                                                          "{n} 릴리스에서 무엇이 바뀌었나요?"] * 2, strict=True)],
    *[(q.format(n=e), e, KIND) for e, q in zip(ERRORS, ["The pump shows {n}, what now?", "泵显示{n}怎么办？",
                                                        "펌프에 {n} 오류가 나면?"] * 2, strict=True)],
    ("PO-2024-00017", "order_form", KIND),
]
