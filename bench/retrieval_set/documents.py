"""The documents: ``key -> (filename, paragraphs)``. A ``.pdf`` filename becomes a PDF with one
page per paragraph (so its chunks span pages); anything else a text or Markdown file."""

from __future__ import annotations

DOCUMENTS: dict[str, tuple[str, list[str]]] = {
    # --- English ------------------------------------------------------------------------------
    "printer": ("printer-manual.md", [
        "# LX-900 office printer: error codes",
        "Error E-4821 means the toner cartridge is not seated. Open the front cover, pull the cartridge out "
        "and push it back until it clicks.",
        "Error E-5102 is a paper jam inside the fuser unit. Switch the printer off and let the fuser cool for "
        "ten minutes before you remove the sheet.",
    ]),
    "vpn": ("vpn-setup.txt", [
        "Remote access uses the company VPN client. Install the client from the software portal, sign in "
        "with your network account and approve the push notification on your phone.",
        "If the tunnel drops every few minutes, the home router probably blocks UDP port 4433; switch the "
        "client to TCP mode. Known issue tracked as incident INC-77310.",
    ]),
    "expenses": ("travel-expense-policy.md", [
        "# Travel expense policy",
        "Clause 4.2: meals on business trips are reimbursed up to 45 euros per day; alcohol is never "
        "reimbursed.",
        "Clause 4.5: receipts must be submitted within 30 days of returning, otherwise the claim lapses.",
    ]),
    "retention": ("data-retention.md", [
        "# Data retention rules",
        "Clause 9.1: application logs are kept for 180 days and then deleted automatically.",
        "Clause 9.3: customer invoices are archived for ten years, as the tax authority requires.",
    ]),
    "heatpump": ("heat-pump-installation.pdf", [
        "Installation guide for the outdoor heat pump unit, part number HP-3300-K.",
        "Leave at least 30 centimetres of free space behind the unit and one metre in front of the fan, "
        "otherwise the unit recirculates its own cold air and loses efficiency.",
        "Mount the unit on anti-vibration feet and connect the condensate drain before the first start.",
    ]),
    "onboarding": ("onboarding-checklist.md", [
        "# First day checklist",
        "New employees collect their access badge from room B-214 on the second floor before nine.",
        "Every newcomer is paired with a mentor for the first three months; the programme is run by "
        "Margaret Oduya from human resources.",
    ]),
    "postmortem": ("postmortem-db-outage.md", [
        "# Postmortem: database outage of 14 March",
        "The primary database refused all connections for 47 minutes because its TLS certificate had "
        "expired overnight. Ticket OPS-1187.",
        "Action items: certificate expiry is now monitored and alerts fire 30 days in advance.",
    ]),
    "bicycle": ("bicycle-care.txt", [
        "Clean and oil the chain every 300 kilometres, and after every ride in the rain.",
        "Road tyres should be inflated to about 4.5 bar; check the pressure once a week because tubes "
        "slowly lose air.",
    ]),
    "sourdough": ("sourdough.md", [
        "# Country sourdough",
        "Feed the starter at 100 percent hydration the evening before baking.",
        "Bake the loaf in a covered pot at 240 degrees for twenty minutes, then uncover it and lower the "
        "oven to 220 degrees for another twenty-five minutes until the crust is deep brown.",
    ]),
    "lighthouse": ("fastnet-lighthouse.txt", [
        "The Fastnet lighthouse off the south-west coast of Ireland was completed in 1904 and is built "
        "from interlocking granite blocks.",
        "Its last resident keeper, James Walsh, left in 1989 when the light became automatic.",
    ]),
    "bees": ("beekeeping-winter.md", [
        "# Winter care of honey bees",
        "Treat colonies against varroa mites with oxalic acid in December, when there is no brood in "
        "the hive and the mites sit on the adult bees.",
        "Do not open the hive below ten degrees; heft it from behind to judge the remaining stores.",
    ]),
    "forklift": ("warehouse-safety.md", [
        "# Warehouse safety rules",
        "Forklifts must not exceed 8 km/h inside the warehouse and must sound the horn at every blind "
        "corner.",
        "Any near miss is reported on form WS-12 within 24 hours, even when nobody was hurt.",
    ]),
    "solar": ("solar-panel-warranty.pdf", [
        "Limited warranty for the SP-410-M photovoltaic module.",
        "The manufacturer guarantees at least 84.8 percent of the rated output after 25 years, with a "
        "linear annual degradation of no more than 0.55 percent.",
        "The warranty does not cover damage from improper mounting, hail larger than 35 mm, or salt mist.",
    ]),
    "ratelimit": ("api-rate-limits.md", [
        "# API rate limits",
        "Each API key may send 600 requests per minute. Beyond that the server answers 429 with error "
        "code RL-009.",
        "The X-RateLimit-Reset header tells the client how many seconds to wait before retrying.",
    ]),
    # --- Chinese ------------------------------------------------------------------------------
    "metro_sh": ("上海地铁换乘.txt", [
        "上海地铁2号线和10号线在南京东路站换乘，换乘通道大约需要步行五分钟。",
        "早高峰时段南京东路站的换乘客流很大，建议乘客错峰出行。",
    ]),
    "leave": ("年假制度.md", [
        "# 员工年假制度",
        "第3.4条：员工累计工作满一年不满十年的，年休假5天；满十年不满二十年的，年休假10天。",
        "第3.6条：未休的年假可以顺延到次年第一季度，逾期作废。",
    ]),
    "aircon": ("空调故障代码.md", [
        "# 空调故障代码说明",
        "故障码F7-203表示室外机温度传感器故障，请联系售后更换传感器。",
        "故障码E1表示室内机与室外机通讯异常，请检查连接线是否松动。",
    ]),
    "tea": ("龙井冲泡.txt", [
        "冲泡西湖龙井时，水温以八十度左右为宜，水太烫会把嫩芽烫熟，茶汤发苦。",
        "每次浸泡大约三分钟，同一份茶叶可以续水冲泡三次。",
    ]),
    "panda": ("大熊猫保护.txt", [
        "卧龙国家级自然保护区位于四川省，是研究和保护大熊猫的重要基地。",
        "保护区的大熊猫主要以竹子为食，成年大熊猫每天要吃十几公斤竹子。",
    ]),
    "reimburse": ("报销流程.md", [
        "# 费用报销流程",
        "员工在系统中填写报销单，例如单号BX-2023-0456，并上传发票照片。",
        "发票必须在开具后六十天内提交，超过期限的发票财务部门不予受理。",
    ]),
    "ev_charge": ("电动汽车充电说明.pdf", [
        "本说明适用于型号为CP-7KW-A的家用交流充电桩。",
        "使用直流快充时，车辆通常在三十分钟内可以从百分之二十充到百分之八十。",
        "充电桩应安装在通风良好的地方，并由持证电工完成接线。",
    ]),
    "rail_refund": ("高铁退票规则.md", [
        "# 高铁退票规则",
        "开车前八天以上退票不收取退票费；开车前四十八小时以上不足八天的，收取票价百分之五的退票费。",
        "开车前不足二十四小时退票的，收取票价百分之二十的退票费。",
    ]),
    "great_wall": ("长城历史.txt", [
        "明长城东起虎山，西至嘉峪关，全长约八千八百五十一点八公里。",
        "嘉峪关是明长城西端的第一座重要关隘，被称为天下第一雄关。",
    ]),
    "server_room": ("机房巡检规范.md", [
        "# 机房巡检规范",
        "机房温度应保持在十八到二十七摄氏度之间，湿度保持在百分之四十到百分之六十之间。",
        "巡检发现的异常必须创建工单，例如工单JF-3391，并在当天处理完毕。",
    ]),
    "kindergarten": ("幼儿园报名.txt", [
        "本市公办幼儿园每年五月开放网上报名，适龄儿童需年满三周岁。",
        "报名时需要提供户口本、出生证明以及疫苗接种证明。",
    ]),
    "parcel_loss": ("快递丢件赔偿.md", [
        "# 快递丢件赔偿说明",
        "已保价的快件丢失，按照声明价值赔偿；未保价的快件丢失，最多按运费的三倍赔偿。",
        "客户应在签收之日起三十天内提出索赔申请。",
    ]),
    "poem": ("静夜思赏析.txt", [
        "《静夜思》是唐代诗人李白的作品，写的是诗人在异乡的月夜思念故乡的情景。",
        "诗中床前明月光一句，以月光比作地上的霜，十分形象。",
    ]),
    "chem_lab": ("化学实验室安全.pdf", [
        "化学实验室安全守则：进入实验室必须穿实验服并佩戴护目镜。",
        "稀释浓硫酸时，一定要把酸慢慢倒入水中，并不断搅拌，绝不能把水倒入酸中。",
        "实验结束后，废液应倒入指定的废液桶，不能直接倒入下水道。",
    ]),
    # --- Korean -------------------------------------------------------------------------------
    "kimchi": ("김치담그기.txt", [
        "배추김치를 담글 때는 배추를 반으로 갈라 소금물에 여덟 시간 정도 절인다.",
        "절인 배추는 찬물에 세 번 헹군 뒤 물기를 빼고 양념을 골고루 바른다.",
    ]),
    "seoul_metro": ("서울지하철2호선.txt", [
        "서울 지하철 2호선은 도심을 한 바퀴 도는 순환선으로, 하루 이용객이 가장 많은 노선이다.",
        "한 바퀴를 도는 데 약 한 시간 반이 걸린다.",
    ]),
    "insurance": ("건강보험안내.md", [
        "# 국민건강보험 본인부담 안내",
        "제12조: 입원 진료의 본인부담률은 진료비의 20퍼센트이다.",
        "제14조: 외래 진료의 본인부담률은 의료기관 종류에 따라 30에서 60퍼센트이다.",
    ]),
    "washer": ("세탁기오류코드.md", [
        "# 드럼 세탁기 오류 코드",
        "오류 코드 UE는 세탁물이 한쪽으로 쏠려 탈수를 할 수 없다는 뜻이다. 세탁물을 고르게 펴 주세요.",
        "오류 코드 4E는 물이 공급되지 않는다는 뜻이다. 수도꼭지가 열려 있는지 확인하세요.",
    ]),
    "hallasan": ("한라산등반.txt", [
        "한라산 성판악 코스는 편도 9.6킬로미터로, 정상인 백록담까지 약 네 시간 반이 걸린다.",
        "진달래밭 대피소에서는 낮 12시 30분 이후 정상 방향 입산이 통제된다.",
    ]),
    "jeonse": ("전세계약주의사항.md", [
        "# 전세 계약 주의사항",
        "계약서를 작성한 뒤 바로 주민센터에서 확정일자를 받아야 보증금을 보호받을 수 있다.",
        "제5조: 임대인은 계약 종료일에 보증금을 반환하여야 한다.",
    ]),
    "hangul": ("훈민정음.txt", [
        "훈민정음은 조선의 세종대왕이 1443년에 창제하고 1446년에 반포한 문자이다.",
        "백성이 쉽게 익혀 날마다 편하게 쓰도록 하려는 뜻에서 만들어졌다.",
    ]),
    "cleanroom": ("반도체클린룸수칙.pdf", [
        "반도체 생산 라인의 클린룸은 ISO 클래스 5 수준의 청정도를 유지한다.",
        "클린룸에 들어가기 전에 방진복, 방진화, 마스크를 착용하고 에어샤워를 통과해야 한다.",
        "클린룸 안에서는 종이와 연필을 사용할 수 없으며 전용 노트만 사용한다.",
    ]),
    "return": ("택배반품안내.md", [
        "# 반품 안내",
        "상품 수령 후 7일 이내에 반품을 신청할 수 있으며, 단순 변심의 경우 왕복 배송비는 고객이 부담한다.",
        "반품 상품에는 송장번호 KR-55012-X처럼 원래 송장번호를 적어 보내 주세요.",
    ]),
    "taekwondo": ("태권도승급심사.txt", [
        "태권도 승급 심사에서는 품새, 겨루기, 격파를 평가한다.",
        "유급자 품새는 태극 1장부터 태극 8장까지이며, 띠 색깔에 따라 심사하는 품새가 정해진다.",
    ]),
    "night_pay": ("야간근로수당.md", [
        "# 야간 근로 수당",
        "오후 10시부터 다음 날 오전 6시 사이에 일하면 통상임금의 50퍼센트를 가산하여 지급한다.",
        "야간 근로가 연장 근로와 겹치면 가산율은 각각 적용된다.",
    ]),
    "ev_subsidy": ("전기차보조금.md", [
        "# 전기차 구매 보조금",
        "승용 전기차 국고 보조금은 최대 680만원이며, 신청 번호 EV-2024-118처럼 접수 번호가 발급된다.",
        "보조금은 출고 순서대로 지급되며 예산이 소진되면 마감된다.",
    ]),
    "ondol": ("온돌의역사.txt", [
        "온돌은 아궁이에서 불을 때어 구들장을 데우는 한국 고유의 난방 방식이다.",
        "뜨거운 연기가 방바닥 아래의 고래를 지나면서 돌을 데우고, 데워진 돌이 오랫동안 열을 낸다.",
    ]),
    "laptop_battery": ("노트북배터리교체.pdf", [
        "노트북 배터리 교체 안내: 교체용 배터리의 부품 번호는 BT-4410-L이다.",
        "이 배터리는 약 500회의 충전 사이클 후 용량이 처음의 80퍼센트로 줄어든다.",
        "교체하기 전에 전원 어댑터를 분리하고 바닥 나사 열 개를 풀어야 한다.",
    ]),
}
